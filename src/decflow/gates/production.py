"""Production gates: `production.requirements`/`warnings` on the aggregate metrics and drift,
`segment_requirements`/`segment_warnings` on every segment (never on drift), as the
production gate registry (`decflow.contracts.gates.PRODUCTION_GATES`) declares each.

There is no implicit production gate: a contract without gates passes. Check order is the
reference's: aggregate requirements in table order, aggregate warnings, then per segment
its requirement checks and its warning checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from decflow.contracts.gates import PRODUCTION_GATES, production_model
from decflow.gates.checks import Check, Level, make_check
from decflow.metrics.production import Metrics, production_value

if TYPE_CHECKING:
    from decflow.contracts.gates import Gating, Production, ProductionGates

NO_RECORDS = "no eligible production records"
NO_BASELINE = "no baseline was provided or the metric is unavailable"
# (gate, metric, comparison) of a gate table, in the registry's (the reference's) order
GateTable = tuple[tuple[str, str, str], ...]


def gate_table(*, segment: bool) -> GateTable:
    """The checked production gates (`segment`: those a segment has, no drift gate)."""
    return tuple((entry.name, entry.metric, entry.comparison)
                 for entry in PRODUCTION_GATES.entries()
                 if entry.checked and not (segment and entry.drift))


def gate_settings(gates: ProductionGates, table: GateTable) -> dict[str, float | None]:
    """Every gate of `table` with its configured limit (None when unset)."""
    return {gate: gates.limit(gate) for gate, _, _ in table}


def config_settings(production: Production, segments: list[str], gating: Gating
                    ) -> dict[str, Any]:
    """A check report's `config`: the segments its records were split by and every gate's
    limit; `gating` only when it is evidence (a point-gated report keeps DecGuard's keys)."""
    config: dict[str, Any] = {
        "segments": segments,
        "requirements": gate_settings(production.requirements, gate_table(segment=False)),
        "warnings": gate_settings(production.warnings, gate_table(segment=False)),
        "segment_requirements": gate_settings(production.segment_requirements,
                                              gate_table(segment=True)),
        "segment_warnings": gate_settings(production.segment_warnings,
                                          gate_table(segment=True)),
    }
    if gating == "evidence":
        config["gating"] = gating
    return config


def _checks(
    limits: Mapping[str, float | None],
    level: Level,
    values: Mapping[str, float | None],
    table: GateTable,
    prefix: str = "",
) -> list[Check]:
    drift_metrics = {entry.metric for entry in PRODUCTION_GATES.entries()
                     if entry.drift}
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
    table = gate_table(segment=False)
    values = {metric: production_value(metrics, metric)
              for _, metric, _ in gate_table(segment=True)}
    values.update(drift)
    return _checks(gate_settings(production.requirements, table), "requirement", values,
                   table) + _checks(gate_settings(production.warnings, table), "warning",
                                    values, table)


def segment_checks(production: Production, name: str, metrics: Metrics) -> list[Check]:
    """Checks of one segment, named `segment[<key>=<value>].<gate>`."""
    table = gate_table(segment=True)
    values = {metric: production_value(metrics, metric) for _, metric, _ in table}
    prefix = f"segment[{name}]."
    return _checks(gate_settings(production.segment_requirements, table), "requirement",
                   values, table, prefix) + _checks(
        gate_settings(production.segment_warnings, table), "warning", values, table, prefix)


def stored_gates(config: Mapping[str, Any]) -> Production:
    """The production gates a check report was judged with (its `config` block) as the
    contract's `production` section; a block that is not one is a `ValueError`."""
    sections = ("requirements", "warnings", "segment_requirements", "segment_warnings")
    return production_model().model_validate({
        "segments": list(config.get("segments") or []),
        **{section: {gate: limit for gate, limit in dict(config.get(section) or {}).items()
                     if limit is not None} for section in sections},
    })
