"""Gate evaluation: metrics and thresholds become checks, a status and an exit code."""

from decflow.gates.checks import (
    NO_ELIGIBLE_CASES,
    Check,
    CheckStatus,
    Comparison,
    Level,
    evidence_check,
    make_check,
    status_of,
)
from decflow.gates.golden_gates import configured_gates, golden_checks, reported_limits
from decflow.gates.headline import failing_first, headline, number
from decflow.metrics.evidence import Evidence

__all__ = [
    "NO_ELIGIBLE_CASES",
    "Check",
    "CheckStatus",
    "Comparison",
    "Evidence",
    "Level",
    "configured_gates",
    "evidence_check",
    "failing_first",
    "golden_checks",
    "headline",
    "make_check",
    "number",
    "reported_limits",
    "status_of",
]
