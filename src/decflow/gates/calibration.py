"""The `max_smooth_ece` gate (requirements, warnings, production): an evidence check.

FAIL only when the evidence shows SmoothECE above the limit, PASS only when it shows it
below, otherwise *not established* (``decflow.metrics.smooth_ece.smooth_ece_evidence``). With
no case whose correctness is known the gate could not be computed and fails, like every gate
without a value.
"""

from __future__ import annotations

from typing import Protocol

from decflow.gates.checks import Check, Level, evidence_check, make_check
from decflow.metrics.smooth_ece import GridSource, smooth_ece_evidence

GATE = "max_smooth_ece"
METRIC = "smooth_ece"


class GateLimits(Protocol):
    """A section of gate limits: golden `requirements`/`warnings` or a production level."""

    def limit(self, name: str) -> float | None: ...


def smooth_ece_checks(
    source: GridSource, n: int, levels: list[tuple[Level, GateLimits]], *, reason_if_empty: str,
) -> list[Check]:
    """One check per level whose gates set ``max_smooth_ece``, in the order given."""
    checks = []
    for level, gates in levels:
        limit = gates.limit(GATE)
        if limit is None:
            continue
        if n == 0:
            checks.append(make_check(GATE, level, METRIC, "<=", limit, None,
                                     reason_if_null=reason_if_empty))
            continue
        checks.append(evidence_check(GATE, level, METRIC, "<=", limit,
                                     smooth_ece_evidence(source, limit, n)))
    return checks
