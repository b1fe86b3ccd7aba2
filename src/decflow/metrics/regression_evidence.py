"""Paired, case-clustered evidence for every regression metric of a diff.

Both runs decided the same cases, so every change is measured case by case (the case is the
sampling unit; a case's reruns are correlated with it):

- accuracy and error rate: a paired difference of proportions (Tango's score bounds,
  `metrics.paired`), tested against the limit as a non-inferiority margin; exact McNemar
  beside it as information;
- Brier and NLL: the mean of the per-case differences (candidate − baseline), by the
  inference core's betting test (`metrics.bounded_mean.mean_test`, valid at every n) over
  the range a per-case difference can take;
- answer flips, mean TV and mean absolute confidence shift: *attributed* against the model's
  own rerun noise (`metrics.rerun_noise`): per case, the baseline→candidate quantity minus
  the same quantity over the case's placebo pairs, a value in [−1, 1]; the mean of those
  excesses is what the change adds to noise (the persona excess, with reruns as the
  placebo), tested by the same betting test. Without reruns there is nothing to attribute
  against, and no evidence (never a verdict on raw flips). A limit of 0 is a count: no
  flip at all holds, any flip is judged as an excess;
- ECE: each run's binned ECE within the L1 bound of its answers' noise at the largest 0/1
  variance, the better calibrated run's not shown above 0 (`metrics.ece_change`: the
  binned ECE's upward bias, largest for the better calibrated run, would otherwise bias
  the increase down);
- macro-F1: a seeded paired bootstrap over cases (`metrics.paired_bootstrap`; not
  established below its minimum number of cases);
- segments: the accuracy drop of each gated segment, Holm-adjusted on each side;
- any other golden metric with a per-case ratio (an extension's diff gate): the change of
  each case's value, over the matched cases both runs count: a share of cases by the paired
  proportions above, any other value by the betting test over its range.

Every result is a `ChangeEvidence`: the core's `MeanTest` (bounds, one-sided p-values, the
cases that would decide it, the effect this n detects) or a limit-0 count, with the noise
floor: for a change, ± the half-width a rerun of the same model would show at this n
(z₀.₉₅·√(mean squared placebo change / n)); for flips, TV and confidence, the placebo's own
mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from decflow.metrics.bounded_mean import mean_test
from decflow.metrics.compare import compare
from decflow.metrics.ece_change import ece_change_test
from decflow.metrics.evidence import (
    ALPHA,
    POWER,
    Evidence,
    EvidenceVerdict,
    MeanTest,
    count_evidence,
    holm_verdicts,
)
from decflow.metrics.golden_cases import CaseValues, PerCase
from decflow.metrics.golden_metrics import NLL_FLOOR
from decflow.metrics.paired import paired_proportions
from decflow.metrics.paired_bootstrap import MIN_CASES as BOOTSTRAP_MIN_CASES
from decflow.metrics.paired_bootstrap import BootstrapChange, macro_f1_change
from decflow.metrics.rerun_noise import Placebo, case_scores

NLL_SPAN = -math.log(NLL_FLOOR)  # the largest per-case NLL
BOOTSTRAP = "seeded paired bootstrap over cases, percentile bounds"
ATTRIBUTED = "excess over rerun placebo pairs"
_Z = NormalDist().inv_cdf(1.0 - ALPHA)
_Z_POWER = NormalDist().inv_cdf(POWER)


@dataclass(frozen=True)
class ChangeEvidence:
    """A change between the runs: a test against the gate's limit, or a limit-0 count,
    with the noise it is judged beside."""

    test: MeanTest | None
    count: Evidence | None = None
    noise: float | None = None  # see the module docstring
    raw: float | None = None  # attributed changes: the raw rate before the placebo
    notes: tuple[str, ...] = ()
    verdict_override: EvidenceVerdict | None = None  # a Holm family's verdict
    details: dict[str, Any] = field(default_factory=dict)

    def _field(self, name: str) -> Any:
        source = self.test if self.test is not None else self.count
        return getattr(source, name)

    @property
    def method(self) -> str:
        return str(self._field("method"))

    @property
    def n(self) -> int:
        return int(self._field("n"))

    @property
    def estimate(self) -> float | None:
        return self._field("estimate")  # type: ignore[no-any-return]

    @property
    def low(self) -> float | None:
        return self._field("low")  # type: ignore[no-any-return]

    @property
    def high(self) -> float | None:
        return self._field("high")  # type: ignore[no-any-return]

    @property
    def cases_needed(self) -> int | None:
        return self._field("cases_needed")  # type: ignore[no-any-return]

    @property
    def detectable(self) -> float | None:
        return self._field("detectable")  # type: ignore[no-any-return]

    @property
    def is_count(self) -> bool:
        return self.count is not None

    def verdict(self) -> EvidenceVerdict:
        """Fails when the lower bound is above the limit, holds when the upper bound is
        below it (α per side), else not established; a count by its count."""
        if self.verdict_override is not None:
            return self.verdict_override
        if self.count is not None:
            return self.count.verdict
        assert self.test is not None
        return self.test.verdict("<=")

    def evidence(self, notes: Sequence[str] = ()) -> Evidence:
        """The record a check carries."""
        every = (*self.notes, *notes)
        if self.count is not None:
            return replace(self.count, notes=tuple(dict.fromkeys((*self.count.notes, *every))))
        assert self.test is not None
        return self.test.evidence("<=", verdict=self.verdict(), notes=every)


def _planned_at(found: ChangeEvidence, level: float) -> ChangeEvidence:
    """A paired proportion's change with its cases needed and detectable effect at another
    level (Holm's), noted."""
    assert found.test is not None
    details = found.details
    planned = paired_proportions(details["newly_worse"], details["newly_better"], found.n,
                                 found.test.limit, alpha=level)
    test = replace(found.test, cases_needed=planned.cases_needed,
                   detectable=planned.detectable)
    return replace(found, test=test,
                   notes=(*found.notes, f"planned at Holm's level {level:.3g}"))


def _noise_floor(squared: np.ndarray, n: int) -> float | None:
    measured = squared[~np.isnan(squared)]
    if not measured.size or n == 0:
        return None
    return _Z * math.sqrt(float(measured.mean()) / n)


@dataclass(frozen=True)
class SegmentRows:
    """One segment (`key=value`) and its rows among the compared cases."""

    key: str
    value: str
    rows: np.ndarray
    gated: bool


class PairedDiff:
    """The matched cases of a diff as per-case paired columns, and the evidence on each
    regression metric. Rows are the cases both runs decided (`compared`), candidate order."""

    def __init__(
        self,
        before: np.ndarray,
        after: np.ndarray,
        expected: np.ndarray,
        placebo: Placebo | None,
        *,
        errored_before: np.ndarray,
        errored_after: np.ndarray,
        calibration_bins: int,
        values: tuple[CaseValues, CaseValues] | None = None,
    ) -> None:
        """`before`/`after`: compared × labels probabilities; `expected` label index (−1
        unlabeled); `errored_*`: every matched case's error flags (the error-rate change);
        `placebo`: per compared case, from the runs' reruns (None: no noise measured);
        `values`: every matched case of each side as the golden gates read it (the change
        of a per-case ratio)."""
        self.before, self.after, self.expected = before, after, expected
        self.placebo = placebo
        self.errored_before, self.errored_after = errored_before, errored_after
        self.bins = calibration_bins
        self.values = values
        shift = compare(before, after, relation="invariant", decision_type="choice")
        self.flip = shift.flipped.astype(float)
        self.tv = shift.tv
        self.confidence = np.abs(shift.confidence_delta)
        self.labeled = expected >= 0
        self.scores_before = case_scores(before, expected)
        self.scores_after = case_scores(after, expected)

    def noise_summary(self) -> dict[str, Any] | None:
        """The placebo's rates over the cases with reruns (None without)."""
        placebo = self.placebo
        if placebo is None or not placebo.measured.any():
            return None
        measured = placebo.measured
        return {
            "cases": int(measured.sum()),
            "pairs": int(placebo.pairs.sum()),
            "flip_rate": float(placebo.flip[measured].mean()),
            "mean_tv_distance": float(placebo.tv[measured].mean()),
            "mean_abs_confidence_delta": float(placebo.confidence[measured].mean()),
        }

    def _floor(self, squared: str, rows: np.ndarray) -> float | None:
        if self.placebo is None:
            return None
        return _noise_floor(getattr(self.placebo, squared)[rows], int(rows.size))

    def _proportion_drop(self, rows: np.ndarray, limit: float) -> ChangeEvidence:
        correct_before = self.scores_before[0][rows] == 1.0
        correct_after = self.scores_after[0][rows] == 1.0
        b = int((correct_before & ~correct_after).sum())
        c = int((~correct_before & correct_after).sum())
        return ChangeEvidence(paired_proportions(b, c, int(rows.size), limit),
                              noise=self._floor("correct_sq", rows),
                              details={"newly_worse": b, "newly_better": c})

    def accuracy_drop(self, limit: float) -> ChangeEvidence:
        """Baseline − candidate accuracy on the labeled cases both decided."""
        return self._proportion_drop(np.flatnonzero(self.labeled), limit)

    def error_rate_increase(self, limit: float) -> ChangeEvidence:
        """Candidate − baseline error rate over every matched case; at limit 0 a count of
        the newly errored cases."""
        newly = int((self.errored_after & ~self.errored_before).sum())
        recovered = int((self.errored_before & ~self.errored_after).sum())
        n = int(self.errored_after.size)
        if limit == 0.0:
            return ChangeEvidence(None, count_evidence(newly, n))
        return ChangeEvidence(paired_proportions(newly, recovered, n, limit),
                              details={"newly_worse": newly, "newly_better": recovered})

    def _paired_mean(self, index: int, limit: float, span: float, squared: str
                     ) -> ChangeEvidence:
        rows = np.flatnonzero(self.labeled)
        change = self.scores_after[index][rows] - self.scores_before[index][rows]
        return ChangeEvidence(mean_test(np.clip(change, -span, span), limit,
                                        support=(-span, span)),
                              noise=self._floor(squared, rows))

    def brier_increase(self, limit: float) -> ChangeEvidence:
        return self._paired_mean(1, limit, 2.0, "brier_sq")

    def nll_increase(self, limit: float) -> ChangeEvidence:
        return self._paired_mean(2, limit, NLL_SPAN, "nll_sq")

    def _attributed(self, raw: np.ndarray, noise: str, limit: float) -> ChangeEvidence | None:
        """The mean of (raw − placebo) over the cases with reruns; None without reruns."""
        if self.placebo is None or not self.placebo.measured.any():
            return None
        rows = np.flatnonzero(self.placebo.measured)
        placebo = getattr(self.placebo, noise)[rows]
        placebo_mean, raw_mean = float(placebo.mean()), float(raw[rows].mean())
        if limit == 0.0 and not raw.any():
            return ChangeEvidence(None, count_evidence(0, int(raw.size)), noise=placebo_mean,
                                  raw=raw_mean)
        test = mean_test(np.clip(raw[rows] - placebo, -1.0, 1.0), limit, support=(-1.0, 1.0))
        return ChangeEvidence(replace(test, method=f"{ATTRIBUTED}, {test.method}"),
                              noise=placebo_mean, raw=raw_mean)

    def attributed_flips(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.flip, "flip", limit)

    def attributed_tv(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.tv, "tv", limit)

    def attributed_confidence(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.confidence, "confidence", limit)

    def _bootstrap(self, found: BootstrapChange, sign: float, limit: float
                   ) -> ChangeEvidence:
        """sign·change with percentile bounds and p-values; cases needed n·(z·sd / gap)²
        at the observed spread (a planning figure)."""
        if found.estimate is None or found.low is None or found.high is None:
            test = MeanTest(BOOTSTRAP, found.n, limit, None, -1.0, 1.0, 1.0, 1.0, None, None)
            return ChangeEvidence(test, verdict_override="not_established")
        low, high = (found.low, found.high) if sign > 0 else (-found.high, -found.low)
        at_or_below, at_or_above = found.p_values(sign * limit)
        p_above, p_below = (at_or_below, at_or_above) if sign > 0 else (
            at_or_above, at_or_below)
        estimate, sd = sign * found.estimate, found.sd or 0.0
        gap = abs(estimate - limit)
        needed = None if gap == 0.0 or sd == 0.0 else max(
            BOOTSTRAP_MIN_CASES, math.ceil(found.n * (_Z * sd / gap) ** 2))
        test = MeanTest(BOOTSTRAP, found.n, limit, estimate, max(low, -1.0), min(high, 1.0),
                        p_above, p_below, needed, (_Z + _Z_POWER) * sd)
        if found.enough_cases:
            return ChangeEvidence(test)
        return ChangeEvidence(
            test, verdict_override="not_established",
            notes=(f"the bootstrap needs at least {BOOTSTRAP_MIN_CASES} cases",))

    def ece_increase(self, limit: float) -> ChangeEvidence:
        """The binned ECE's change, with bounds that allow for its bias
        (`metrics.ece_change`)."""
        rows = np.flatnonzero(self.labeled)
        before, after = self.before[rows], self.after[rows]
        return ChangeEvidence(ece_change_test(
            before.max(axis=1), self.scores_before[0][rows] == 1.0,
            after.max(axis=1), self.scores_after[0][rows] == 1.0, self.bins, limit))

    def macro_f1_drop(self, limit: float) -> ChangeEvidence:
        rows = np.flatnonzero(self.labeled)
        found = macro_f1_change(
            self.expected[rows], np.argmax(self.before[rows], axis=1),
            np.argmax(self.after[rows], axis=1), self.before.shape[1],
        )
        return self._bootstrap(found, -1.0, limit)

    def ratio_change(self, per_case: Callable[[CaseValues], PerCase], limit: float, *,
                     drop: bool, counts: bool) -> ChangeEvidence | None:
        """The change of a golden per-case ratio, case by case over the matched cases both
        runs count (denominator above 0): candidate − baseline (baseline − candidate for a
        `drop`). `counts`: a share of cases (0/1 values), judged as paired proportions
        (a limit of 0 as the count of cases newly worse); otherwise the mean change by the
        betting test over ±(largest value). None without the sides' values."""
        if self.values is None:
            return None
        (num_b, den_b, top), (num_a, den_a, _) = (per_case(side) for side in self.values)
        den_b, den_a = np.asarray(den_b, dtype=float), np.asarray(den_a, dtype=float)
        rows = (den_b > 0) & (den_a > 0)
        before = np.asarray(num_b, dtype=float)[rows] / den_b[rows]
        after = np.asarray(num_a, dtype=float)[rows] / den_a[rows]
        change = before - after if drop else after - before
        n = int(rows.sum())
        if counts:
            worse, better = int((change > 0).sum()), int((change < 0).sum())
            if limit == 0.0:
                return ChangeEvidence(None, count_evidence(worse, n))
            return ChangeEvidence(paired_proportions(worse, better, n, limit),
                                  details={"newly_worse": worse, "newly_better": better})
        span = float(top)
        return ChangeEvidence(mean_test(np.clip(change, -span, span), limit,
                                        support=(-span, span)))

    def segment_drops(self, segments: Sequence[SegmentRows], limit: float
                      ) -> list[tuple[SegmentRows, ChangeEvidence]]:
        """The accuracy drop of each gated segment with its decided cases, each verdict
        Holm-adjusted on each side across them. An undecided segment is planned at the level
        Holm asks of it on the side its drop lies: with r of the m segments decided on that
        side, one more is once its own p-value is below α / (m − r) (at α its cases needed
        could be fewer than it already has)."""
        gated = [s for s in segments if s.gated]
        found = [(s, self._proportion_drop(s.rows[self.labeled[s.rows]], limit))
                 for s in gated]
        found = [(s, e) for s, e in found if e.n > 0]
        verdicts = holm_verdicts([e.test for _, e in found], "<=")
        levels = {side: ALPHA / max(1, len(found) - verdicts.count(side))
                  for side in ("fails", "holds")}
        out = []
        for (segment, evidence), verdict in zip(found, verdicts, strict=True):
            judged = replace(evidence, verdict_override=verdict)
            test = evidence.test
            if verdict == "not_established" and test is not None and test.estimate is not None:
                level = levels["fails" if test.estimate > limit else "holds"]
                if level < ALPHA:
                    judged = _planned_at(judged, level)
            out.append((segment, judged))
        return out
