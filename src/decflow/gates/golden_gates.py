"""Golden gates: contract ``requirements`` / ``warnings`` against golden metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from decflow.gates.checks import NO_ELIGIBLE_CASES, Check, Comparison, Level, make_check
from decflow.metrics.golden_metrics import Metrics, metric_value

if TYPE_CHECKING:
    from typing import TypeAlias

    from decflow.contracts.gates import GoldenGates

    # Golden gate limits: the contract's section, a report's copy of it (keys named like
    # the gates, None when unset), or nothing.
    GateLimits: TypeAlias = GoldenGates | Mapping[str, float | None] | None

GOLDEN_GATES: Mapping[str, tuple[str, Comparison]] = {
    "min_accuracy": ("accuracy", ">="),
    "min_macro_f1": ("macro_f1", ">="),
    "max_nll": ("nll", "<="),
    "max_brier": ("brier", "<="),
    "max_ece": ("ece", "<="),
    "min_coverage": ("coverage", ">="),
    "max_abstention_rate": ("abstention_rate", "<="),
    "min_selective_accuracy": ("selective_accuracy", ">="),
    "max_error_rate": ("error_rate", "<="),
    "max_latency_p95_ms": ("latency_p95_ms", "<="),
    "max_ordinal_mae": ("ordinal_mae", "<="),
}
"""gate -> (metric, comparison that must hold), in the fixed order checks are listed."""

IMPLICIT_MAX_ERROR_RATE = 0.0

_NOT_SCORE = "ordinal_mae applies to score decisions only"


def configured_gates(gates: GateLimits) -> dict[str, float]:
    """The gates a contract section (or a report's copy of it) sets, in table order."""
    if gates is None:
        return {}
    if isinstance(gates, Mapping):
        values = {name: gates.get(name) for name in GOLDEN_GATES}
    else:
        values = {name: getattr(gates, name, None) for name in GOLDEN_GATES}
    return {name: float(value) for name, value in values.items() if value is not None}


def _gate_check(
    gate: str, threshold: float, level: Level, metrics: Metrics, decision_type: str
) -> Check:
    metric, comparison = GOLDEN_GATES[gate]
    # A valid contract only sets max_ordinal_mae on score decisions; say why if not.
    reason = _NOT_SCORE if metric == "ordinal_mae" and decision_type != "score" else None
    return make_check(
        gate,
        level,
        metric,
        comparison,
        threshold,
        metric_value(metrics, metric),
        reason_if_null=reason or NO_ELIGIBLE_CASES,
    )


def golden_checks(
    metrics: Metrics, requirements: GateLimits, warnings: GateLimits, decision_type: str
) -> list[Check]:
    """Requirement checks in table order, then ``max_error_rate: 0`` when the contract does
    not set it (a case the backend could not decide fails unless tolerated), then warning
    checks in table order."""
    required = configured_gates(requirements)
    required.setdefault("max_error_rate", IMPLICIT_MAX_ERROR_RATE)
    levels: list[tuple[Level, dict[str, float]]] = [
        ("requirement", required),
        ("warning", configured_gates(warnings)),
    ]
    return [
        _gate_check(gate, threshold, level, metrics, decision_type)
        for level, gates in levels
        for gate, threshold in gates.items()
    ]
