"""The evidence record behind every inferential verdict, and the one level convention.

Level convention (docs/statistics.md, "Level convention"): α = 0.05 per side. A gate of the
form ``quantity <= limit`` *fails* only when the one-sided 95 % lower bound is above the limit
(a wrong FAIL at the limit has probability ≤ α) and *holds* only when the one-sided 95 % upper
bound is below it (a wrong PASS has probability ≤ α); otherwise it is *not established*. For
``quantity >= limit`` the roles of the bounds swap. Together the two bounds are a 90 %
two-sided interval, shown as ``[low, high]`` and labelled "95% per side". Bounds are clipped
to the parameter's range. A family of verdicts (segments) is Holm-adjusted on each side
(``holm_verdicts``); the persona axes only on the unfair side (their "every axis fair" is an
intersection–union test, each axis at α).

How to use it (the methods live in ``decflow.metrics.bounded_mean``):

- compute a :class:`MeanTest` for each sample against its limit:
  ``binomial_test(count, n, limit)`` for 0/1 per-case values (exact Clopper–Pearson) or
  ``mean_test(values, limit, support=(lo, hi))`` for per-case values in a known range
  (betting, valid at every n);
- turn it into an :class:`Evidence` with ``test.evidence(comparison)``; for a family,
  ``holm_verdicts(tests, comparison)`` gives the Holm-adjusted verdicts to pass as
  ``test.evidence(comparison, verdict=...)``;
- ``count_evidence(count, n)`` is the limit-0 rule: one occurrence fails, "0 of n" holds
  with its exact upper bound 1 − α^(1/n).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.metrics.stats import holm

ALPHA = 0.05
POWER = 0.80

EvidenceVerdict = Literal["holds", "fails", "not_established"]
GateDirection = Literal["<=", ">="]

UNDERPOWERED = "underpowered"
NOISE_DOMINATED = "noise-dominated"
NOT_EXERCISED = "not exercised"
# A limit-0 gate a sequential run passed as a share below `sequential.zero_limit`, not as a
# count over every case (its check line and the headline say so).
ZERO_LIMIT = "zero_limit"
# A confidence sequence whose bounds crossed: no value survives them (shown instead of an
# inverted interval).
CONTRADICTED = "contradicted"


@dataclass(frozen=True)
class Evidence:
    """What an inferential verdict rests on: ``n`` sampling units (cases), the estimate and
    its one-sided 95 % bounds (clipped to the parameter's range), the verdict they give, and
    for an undecided one the cases that would decide it and the effect this ``n`` detects
    with 80 % power. ``notes`` carry qualifiers such as ``underpowered`` or
    ``noise-dominated``. (Re-exported by ``decflow.gates.checks``, which builds checks
    from it.)"""

    method: str
    n: int
    verdict: EvidenceVerdict
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    cases_needed: int | None = None
    detectable: float | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object; fields left unset (None, no notes) are omitted."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        return {k: v for k, v in out.items() if v is not None and v != []}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["notes"] = tuple(values.get("notes") or ())
        return cls(**values)


@dataclass(frozen=True)
class MeanTest:
    """One sample of per-case values tested against one limit, both sides.

    ``p_above`` is the one-sided p-value of H0: mean ≤ limit (small when the data show the
    mean above the limit); ``p_below`` that of H0: mean ≥ limit. ``low``/``high`` are the
    one-sided (1 − α) bounds, so ``p_above < α`` exactly when ``low > limit`` and
    ``p_below < α`` exactly when ``high < limit``. ``cases_needed``: cases at which the
    observed estimate (and spread) would decide it on the estimate's side; ``detectable``:
    the distance from the limit, on that side, detected with 80 % power at this n.
    """

    method: str
    n: int
    limit: float
    estimate: float | None
    low: float | None
    high: float | None
    p_above: float
    p_below: float
    cases_needed: int | None
    detectable: float | None
    notes: tuple[str, ...] = field(default=())

    def verdict(
        self, comparison: GateDirection = "<=", *, alpha: float = ALPHA
    ) -> EvidenceVerdict:
        """The unadjusted tri-state verdict of ``quantity <comparison> limit``."""
        return verdict_from_p(comparison, self.p_above, self.p_below, alpha)

    def evidence(
        self,
        comparison: GateDirection = "<=",
        *,
        verdict: EvidenceVerdict | None = None,
        notes: Sequence[str] = (),
        alpha: float = ALPHA,
    ) -> Evidence:
        """The record for a check; ``verdict`` overrides the unadjusted one (Holm families)."""
        decided = self.verdict(comparison, alpha=alpha) if verdict is None else verdict
        return Evidence(
            method=self.method,
            n=self.n,
            verdict=decided,
            estimate=self.estimate,
            low=self.low,
            high=self.high,
            cases_needed=self.cases_needed,
            detectable=self.detectable,
            notes=tuple(dict.fromkeys((*self.notes, *notes))),
        )


def verdict_from_p(
    comparison: GateDirection, p_above: float, p_below: float, alpha: float = ALPHA
) -> EvidenceVerdict:
    """``<=``: fails when p_above < α, holds when p_below < α; ``>=`` the other way round."""
    if comparison not in ("<=", ">="):
        raise ValueError(f"comparison must be '<=' or '>=', got {comparison!r}")
    shows_above, shows_below = p_above < alpha, p_below < alpha
    if shows_above:
        return "fails" if comparison == "<=" else "holds"
    if shows_below:
        return "holds" if comparison == "<=" else "fails"
    return "not_established"


def holm_verdicts(
    tests: Sequence[MeanTest | None], comparison: GateDirection = "<=", *, alpha: float = ALPHA
) -> list[EvidenceVerdict | None]:
    """Verdicts for a family, Holm-adjusted on each side separately (None entries are not
    tested and stay None): every wrong FAIL in the family together has probability ≤ α, and
    every wrong PASS together likewise."""
    tested = [i for i, t in enumerate(tests) if t is not None]
    above = holm([tests[i].p_above for i in tested])  # type: ignore[union-attr]
    below = holm([tests[i].p_below for i in tested])  # type: ignore[union-attr]
    out: list[EvidenceVerdict | None] = [None] * len(tests)
    for position, i in enumerate(tested):
        out[i] = verdict_from_p(comparison, above[position], below[position], alpha)
    return out


def count_evidence(count: int, n: int, *, alpha: float = ALPHA) -> Evidence:
    """A limit-0 gate as a count: one occurrence fails; "0 of n" holds, with its exact
    one-sided upper bound 1 − α^(1/n). Nothing run (n = 0) is not established."""
    if n < 0 or not 0 <= count <= n:
        raise ValueError(f"count_evidence needs 0 <= count <= n, got {count} of {n}")
    if n == 0:
        return Evidence("exact (Clopper-Pearson), 0 of 0", 0, "not_established",
                        notes=(NOT_EXERCISED,))
    return Evidence(
        method=f"exact (Clopper-Pearson), {count} of {n}",
        n=n,
        verdict="fails" if count else "holds",
        estimate=count / n,
        low=clopper_pearson_low(count, n, alpha),
        high=clopper_pearson_high(count, n, alpha),
    )
