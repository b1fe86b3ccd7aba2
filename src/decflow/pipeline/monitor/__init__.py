"""Production monitoring (`decflow monitor`): a source's new partitions checked as windows
by record timestamp on the production check's stages, labels joined to compact stored
predictions as they arrive, the harmful-shift detector, and the monitor's state."""
