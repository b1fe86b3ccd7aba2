"""decflow's version, in a module of its own so every layer can name it without importing
the package's lazy SDK names."""

__version__ = "0.1.0"
