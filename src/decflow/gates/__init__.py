"""Gate evaluation: metrics and thresholds become checks, a status and an exit code."""

from decflow.gates.checks import (
    NO_ELIGIBLE_CASES,
    Check,
    CheckStatus,
    Comparison,
    Level,
    make_check,
    status_of,
)
from decflow.gates.golden_gates import GOLDEN_GATES, configured_gates, golden_checks

__all__ = [
    "GOLDEN_GATES",
    "NO_ELIGIBLE_CASES",
    "Check",
    "CheckStatus",
    "Comparison",
    "Level",
    "configured_gates",
    "golden_checks",
    "make_check",
    "status_of",
]
