"""decflow: test, fuzz, compare, monitor and gate probabilistic AI decisions.

The SDK names below load lazily, so `import decflow` stays light (no polars, never prefect):
`decflow.DecisionGuard`, `decflow.PolicyDecision`, `decflow.run_test`, `decflow.run_check`,
`decflow.run_diff`, `decflow.typed_report`, `decflow.render_text` (from `decflow.sdk`) and
`decflow.probe`.
"""

from __future__ import annotations

import importlib
from typing import Any

from decflow.version import __version__

__all__ = ["__version__"]

_SDK_NAMES = frozenset(
    {"DecisionGuard", "PolicyDecision", "run_test", "run_check", "run_diff", "typed_report",
     "render_text"}
)


def __getattr__(name: str) -> Any:
    if name == "probe":
        return importlib.import_module("decflow.probe")
    if name in _SDK_NAMES:
        return getattr(importlib.import_module("decflow.sdk"), name)
    raise AttributeError(f"module 'decflow' has no attribute {name!r}")
