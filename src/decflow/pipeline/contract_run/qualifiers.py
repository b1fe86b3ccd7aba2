"""What a reader must know about a run's verdict beside its checks: the headline's
qualifiers (PRODUCT §4, "Headlines"). They never change the verdict; they say what it rests
on where that is less than it looks:

- `zero_limit`: a sequential run passed a limit-0 gate as a share below
  `sequential.zero_limit`, without seeing every case (`sequential.gates.zero_limit_unseen`);
- `underpowered`: a DecGuard-parity gate passes on its point estimate while its evidence
  (the exact binomial bound of a golden rate, the case-level bound of a property rate) does
  not show it on the right side of its limit: `min_accuracy lower bound 0.3684`.

A FAIL stands whatever its passing gates rest on, so only a PASS or a WARN is qualified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from decflow.contracts.gates import golden_gate
from decflow.gates.checks import Check
from decflow.gates.headline import Qualifier, number
from decflow.metrics.evidence import UNDERPOWERED, ZERO_LIMIT


def run_qualifiers(status: str, checks: Sequence[Check],
                   gate_evidence: Sequence[Mapping[str, Any]],
                   properties: Mapping[str, Any] | None,
                   sequential: Mapping[str, Any] | None) -> list[Qualifier]:
    """The qualifiers of a run report with `status`, its checks, golden `gate_evidence`,
    `properties` section and `sequential` section."""
    if status == "fail":
        return []
    found = [zero_limit_qualifier(sequential["gates"]) if sequential is not None else None,
             underpowered(checks, gate_evidence, properties)]
    return [q for q in found if q is not None]


def underpowered(checks: Sequence[Check], gate_evidence: Sequence[Mapping[str, Any]],
                 properties: Mapping[str, Any] | None) -> Qualifier | None:
    """``(underpowered: min_accuracy lower bound 0.3684, …)``: the passing point-estimate
    checks whose evidence, beside them, is marked underpowered."""
    point_passes = {c.gate for c in checks if c.status == "pass" and c.evidence is None}
    items = []
    for entry in gate_evidence:
        evidence = entry["evidence"]
        if entry["gate"] in point_passes and UNDERPOWERED in evidence.get("notes", []):
            bound = "lower" if golden_gate(entry["gate"]).comparison == ">=" else "upper"
            items.append(f"{entry['gate']} {bound} bound "
                         f"{number(evidence.get('low' if bound == 'lower' else 'high'))}")
    for entry in (properties or {}).get("rate_evidence") or []:
        if entry["gate"] in point_passes and entry.get("underpowered"):
            items.append(f"{entry['gate']} upper bound {number(entry['ci_high'])}")
    return Qualifier(UNDERPOWERED, ", ".join(items)) if items else None


def zero_limit_qualifier(rows: Sequence[Mapping[str, Any]]) -> Qualifier | None:
    """The headline's ``(zero_limit: …)`` from the sequential section's gate rows: the
    limit-0 gates passed at zero_limit (one text for gates that share it)."""
    judged = [(row["gate"], row[ZERO_LIMIT]) for row in rows if row.get(ZERO_LIMIT)]
    if not judged:
        return None
    texts = {text for _, text in judged}
    if len(texts) == 1:
        return Qualifier(ZERO_LIMIT, f"{', '.join(g for g, _ in judged)} {texts.pop()}")
    return Qualifier(ZERO_LIMIT, "; ".join(f"{gate} {text}" for gate, text in judged))
