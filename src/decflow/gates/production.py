"""Production gates: `production.requirements`/`warnings` on the aggregate metrics and drift,
`segment_requirements`/`segment_warnings` on every segment (never on drift).

There is no implicit production gate: a contract without gates passes. Check order is the
reference's: aggregate requirements in table order, aggregate warnings, then per segment
its requirement checks and its warning checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from decflow.gates.checks import Check, Level, make_check
from decflow.metrics.production import Metrics, production_value

if TYPE_CHECKING:
    from decflow.contracts.gates import Gating, Production, ProductionSegmentGates

# (gate, metric, comparison) in the reference's table order.
SEGMENT_GATES: tuple[tuple[str, str, str], ...] = (
    ("min_accuracy", "accuracy", ">="),
    ("max_error_rate", "error_rate", "<="),
    ("max_ece", "ece", "<="),
    ("max_brier", "brier", "<="),
    ("max_nll", "nll", "<="),
    ("min_threshold_coverage", "threshold_coverage", ">="),
    ("max_abstention_rate", "abstention_rate", "<="),
    ("max_fallback_rate", "fallback_rate", "<="),
)
DRIFT_GATES: tuple[tuple[str, str, str], ...] = (
    ("max_confidence_tv_distance", "confidence_tv_distance", "<="),
    ("max_accuracy_drop", "accuracy_drop", "<="),
    ("max_ece_increase", "ece_increase", "<="),
)
PRODUCTION_GATES = SEGMENT_GATES + DRIFT_GATES
NO_RECORDS = "no eligible production records"
NO_BASELINE = "no baseline was provided or the metric is unavailable"


def gate_settings(
    gates: ProductionSegmentGates, table: tuple[tuple[str, str, str], ...]
) -> dict[str, float | None]:
    """Every gate of `table` with its configured limit (None when unset)."""
    return {gate: getattr(gates, gate, None) for gate, _, _ in table}


def config_settings(production: Production, segments: list[str], gating: Gating
                    ) -> dict[str, Any]:
    """A check report's `config`: the segments its records were split by and every gate's
    limit; `gating` only when it is evidence (a point-gated report keeps DecGuard's keys)."""
    config: dict[str, Any] = {
        "segments": segments,
        "requirements": gate_settings(production.requirements, PRODUCTION_GATES),
        "warnings": gate_settings(production.warnings, PRODUCTION_GATES),
        "segment_requirements": gate_settings(production.segment_requirements, SEGMENT_GATES),
        "segment_warnings": gate_settings(production.segment_warnings, SEGMENT_GATES),
    }
    if gating == "evidence":
        config["gating"] = gating
    return config


def _checks(
    limits: Mapping[str, float | None],
    level: Level,
    values: Mapping[str, float | None],
    table: tuple[tuple[str, str, str], ...],
    prefix: str = "",
) -> list[Check]:
    drift_metrics = {metric for _, metric, _ in DRIFT_GATES}
    checks = []
    for gate, metric, comparison in table:
        limit = limits.get(gate)
        if limit is None:
            continue
        checks.append(
            make_check(
                prefix + gate,
                level,
                prefix + metric,
                comparison,  # type: ignore[arg-type]
                limit,
                values.get(metric),
                reason_if_null=NO_BASELINE if metric in drift_metrics else NO_RECORDS,
            )
        )
    return checks


def aggregate_checks(
    production: Production, metrics: Metrics, drift: Mapping[str, float | None]
) -> list[Check]:
    """Checks of `production.requirements` then `production.warnings`."""
    values = {metric: production_value(metrics, metric) for _, metric, _ in SEGMENT_GATES}
    values.update(drift)
    return _checks(
        gate_settings(production.requirements, PRODUCTION_GATES),
        "requirement",
        values,
        PRODUCTION_GATES,
    ) + _checks(
        gate_settings(production.warnings, PRODUCTION_GATES), "warning", values, PRODUCTION_GATES
    )


def segment_checks(production: Production, name: str, metrics: Metrics) -> list[Check]:
    """Checks of one segment, named `segment[<key>=<value>].<gate>`."""
    values = {metric: production_value(metrics, metric) for _, metric, _ in SEGMENT_GATES}
    prefix = f"segment[{name}]."
    return _checks(
        gate_settings(production.segment_requirements, SEGMENT_GATES),
        "requirement",
        values,
        SEGMENT_GATES,
        prefix,
    ) + _checks(
        gate_settings(production.segment_warnings, SEGMENT_GATES),
        "warning",
        values,
        SEGMENT_GATES,
        prefix,
    )


def stored_gates(config: Mapping[str, Any]) -> Production:
    """The production gates a check report was judged with (its `config` block) as the
    contract's `production` section; a block that is not one is a `ValueError`."""
    from decflow.contracts.gates import Production

    sections = ("requirements", "warnings", "segment_requirements", "segment_warnings")
    return Production.model_validate({
        "segments": list(config.get("segments") or []),
        **{section: {gate: limit for gate, limit in dict(config.get(section) or {}).items()
                     if limit is not None} for section in sections},
    })
