"""Evidence beside DecGuard's golden rate gates (their verdicts stay point estimates): the
gates whose registry entry says where their count sits (`GoldenGate.rate`).

A golden rate is a count over cases (accuracy: correct of labeled; error rate: errored of
all; coverage: covered of decided; abstention: the rest; selective accuracy: correct of
covered labeled), so its evidence is exact: the binomial test of ``decflow.metrics``. A pass
the evidence does not establish is *underpowered*, with the cases that would establish it; a
limit-0 gate (`max_error_rate: 0`, also the implicit one) is a count: "0 of n" with its exact
upper bound 1 − 0.05^(1/n), one occurrence fails. Listed in the report's `gate_evidence`.
"""

from __future__ import annotations

from typing import Any

from decflow.contracts.gates import GOLDEN_GATES
from decflow.gates.golden_gates import configured_gates, required_gates
from decflow.metrics.bounded_mean import binomial_test
from decflow.metrics.evidence import UNDERPOWERED, Evidence, GateDirection, count_evidence


def _evidence(rate: float, n: int, limit: float, comparison: GateDirection) -> Evidence:
    count = round(rate * n)
    if comparison == "<=" and limit == 0:
        return count_evidence(count, n)
    if not 0 < limit < 1:  # a limit of 1 (or ≥ 0) decides itself: no inference to add
        return Evidence("exact binomial (Clopper-Pearson), case as unit", n,
                        "holds" if (rate <= limit if comparison == "<=" else rate >= limit)
                        else "fails", estimate=rate)
    return binomial_test(count, n, limit).evidence(comparison)


def golden_gate_evidence(
    metrics: dict[str, Any], requirements: Any, warnings: Any
) -> list[dict[str, Any]]:
    """One entry per configured rate gate (requirements, the implicit `max_error_rate: 0`,
    then warnings): gate, level, limit, DecGuard's verdict and the evidence beside it."""
    out = []
    for level, gates in (("requirement", required_gates(requirements)),
                         ("warning", configured_gates(warnings))):
        for gate, limit in gates.items():
            entry = GOLDEN_GATES.get(gate)
            if entry.rate is None:
                continue
            comparison: GateDirection = entry.comparison
            section = metrics.get(entry.rate.section) or {}
            rate, n = section.get(entry.rate.key), section.get(entry.rate.size)
            if rate is None or not n:
                continue
            evidence = _evidence(rate, n, limit, comparison)
            passes = rate <= limit if comparison == "<=" else rate >= limit
            if passes and evidence.verdict != "holds":
                evidence = Evidence(**{**evidence.__dict__, "notes": (UNDERPOWERED,)})
            out.append({"gate": gate, "level": level, "limit": limit,
                        "decguard": "pass" if passes else "fail",
                        "evidence": evidence.to_dict()})
    return out
