"""decflow: test, fuzz, compare, monitor and gate probabilistic AI decisions."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so `import decflow` stays light (no polars, never prefect) until probe is used.
    if name == "probe":
        import importlib

        return importlib.import_module("decflow.probe")
    raise AttributeError(f"module 'decflow' has no attribute {name!r}")
