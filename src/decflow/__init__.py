"""decflow: test, fuzz, compare, monitor and gate probabilistic AI decisions."""

__version__ = "0.1.0"
