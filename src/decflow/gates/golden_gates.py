"""Golden gates: contract ``requirements`` / ``warnings`` against golden metrics, as the
golden gate registry (`decflow.contracts.gates.GOLDEN_GATES`) declares each: the metric it
reads and the comparison that must hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from decflow.contracts.gates import GOLDEN_GATES, GoldenGate, GoldenGates
from decflow.gates.checks import NO_ELIGIBLE_CASES, Check, Level, make_check
from decflow.metrics.golden_metrics import Metrics

if TYPE_CHECKING:
    from typing import TypeAlias

    # Golden gate limits: the contract's section, a report's copy of it (keys named like
    # the gates, None when unset), or nothing.
    GateLimits: TypeAlias = GoldenGates | Mapping[str, float | None] | None

def checked_gates() -> tuple[GoldenGate, ...]:
    """The golden gates the golden checks judge, in the fixed order checks are listed."""
    return tuple(gate for gate in GOLDEN_GATES.entries() if gate.checked)


def configured_gates(gates: GateLimits) -> dict[str, float]:
    """The checked gates a contract section (or a report's copy of it) sets, in order."""
    if gates is None:
        return {}
    if isinstance(gates, Mapping):
        values = {gate.name: gates.get(gate.name) for gate in checked_gates()}
    else:
        values = {gate.name: gates.limit(gate.name) for gate in checked_gates()}
    return {name: float(value) for name, value in values.items() if value is not None}


def required_gates(requirements: GateLimits) -> dict[str, float]:
    """The requirements a run is judged by: those the section sets, then each implicit one
    it does not set (`GoldenGate.implicit`: `max_error_rate: 0`)."""
    required = configured_gates(requirements)
    for gate in checked_gates():
        if gate.implicit is not None:
            required.setdefault(gate.name, gate.implicit)
    return required


def reported_limits(gates: GoldenGates) -> dict[str, float | None]:
    """A section as a report keeps it: every one of DecGuard's gates (None when unset),
    then the extension gates it sets."""
    return {gate.name: gates.limit(gate.name) for gate in checked_gates()
            if gate.core or gates.limit(gate.name) is not None}


def gate_value(metrics: Metrics, gate: GoldenGate) -> float | None:
    """The value gate `gate` reads: e.g. ``coverage`` is None when there is no selective
    section."""
    section_name, key = gate.path
    section = metrics.get(section_name)
    return None if section is None else section.get(key)


def _not_applicable(gate: GoldenGate, decision_type: str) -> str | None:
    # A valid contract only sets a score gate on score decisions; say why if not.
    if gate.score_only and decision_type != "score":
        return f"{gate.metric} applies to score decisions only"
    return None


def golden_checks(
    metrics: Metrics, requirements: GateLimits, warnings: GateLimits, decision_type: str
) -> list[Check]:
    """Requirement checks in gate order, then each implicit requirement the contract does
    not set (``max_error_rate: 0``: a case the backend could not decide fails unless
    tolerated), then warning checks in gate order."""
    levels: list[tuple[Level, dict[str, float]]] = [
        ("requirement", required_gates(requirements)),
        ("warning", configured_gates(warnings)),
    ]
    checks = []
    for level, gates in levels:
        for name, threshold in gates.items():
            gate = GOLDEN_GATES.get(name)
            checks.append(make_check(
                name, level, gate.metric, gate.comparison, threshold, gate_value(metrics, gate),
                reason_if_null=_not_applicable(gate, decision_type) or NO_ELIGIBLE_CASES))
    return checks
