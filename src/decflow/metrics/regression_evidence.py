"""Paired, case-clustered evidence for every regression metric of a diff.

Both runs decided the same cases, so every change is measured case by case (the case is the
sampling unit; a case's reruns are correlated with it):

- accuracy and error rate: a paired difference of proportions (Tango's score bounds,
  `metrics.paired`), tested against the limit as a non-inferiority margin; exact McNemar
  beside it as information;
- Brier and NLL: the mean of the per-case differences (candidate − baseline);
- answer flips, mean TV and mean absolute confidence shift: *attributed* against the model's
  own rerun noise (`metrics.rerun_noise`): per case, the baseline→candidate quantity minus
  the same quantity over the case's placebo pairs; the mean of those excesses is what the
  change adds to noise (the persona excess, with reruns as the placebo). Without reruns
  there is nothing to attribute against, and no evidence;
- ECE and macro-F1: a seeded paired bootstrap over cases (`metrics.paired_bootstrap`);
- segments: the accuracy drop of each gated segment, Holm-adjusted across segments.

Every result is a `ChangeEvidence` judged against a limit by the caller (`gates.regression`):
one-sided 95 % bounds, p-values where the method has them, the cases that would decide it,
the effect this n detects, and the noise floor: for a change, ± the half-width a rerun of
the same model would show at this n (z₀.₉₅·√(mean squared placebo change / n)); for flips,
TV and confidence, the placebo's own mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from decflow.metrics.compare import compare
from decflow.metrics.golden_metrics import NLL_FLOOR
from decflow.metrics.paired import paired_proportions
from decflow.metrics.paired_bootstrap import MIN_CASES as BOOTSTRAP_MIN_CASES
from decflow.metrics.paired_bootstrap import BootstrapChange, ece_change, macro_f1_change
from decflow.metrics.rerun_noise import Placebo, case_scores
from decflow.metrics.stats import holm, student_t_quantile, student_t_sf

ALPHA = 0.05
POWER = 0.80
MIN_CASES = 10  # fewer paired cases than this: a mean change is not established
NLL_SPAN = -math.log(NLL_FLOOR)  # the largest per-case NLL
_Z = NormalDist().inv_cdf(1.0 - ALPHA)
_Z_POWER = NormalDist().inv_cdf(POWER)

TANGO = "paired difference of proportions (Tango score), case as unit; McNemar beside"
MEAN = "paired mean difference (Student t), case as unit"
ATTRIBUTED = "excess over rerun placebo pairs (Student t), case as unit"
BOOTSTRAP = "seeded paired bootstrap over cases, percentile bounds"


@dataclass(frozen=True)
class ChangeEvidence:
    """A change between the runs, with what a verdict against a limit needs."""

    method: str
    n: int
    estimate: float | None
    low: float | None  # one-sided 95 % lower bound (clipped to the change's range)
    high: float | None
    p_above: float | None = None  # H0: change ≤ limit (small: shown above the limit)
    p_below: float | None = None  # H0: change ≥ limit (small: shown below it)
    cases_needed: int | None = None
    detectable: float | None = None
    noise: float | None = None  # see the module docstring
    raw: float | None = None  # attributed changes: the raw rate before the placebo
    enough_cases: bool = True
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    counted: str | None = None  # a limit-0 count's verdict (`holds` at 0 of n, else `fails`)

    def verdict(self, limit: float) -> str:
        """`fails` (lower bound above the limit), `holds` (upper bound below), else
        `not_established`; never decided without enough cases. A limit-0 count is
        decided by its count."""
        if self.counted is not None:
            return self.counted
        if not self.enough_cases or self.low is None or self.high is None:
            return "not_established"
        if self.low > limit:
            return "fails"
        if self.high < limit:
            return "holds"
        return "not_established"


def _clip(value: float, span: float) -> float:
    return min(max(value, -span), span)


def mean_change(
    differences: np.ndarray, limit: float, *, span: float, method: str = MEAN,
    floor_variance: float = 0.0,
) -> ChangeEvidence:
    """One-sided Student t bounds of the mean per-case difference, p-values against
    `limit`, and sizing. `floor_variance` keeps a quiet sample from looking certain (the
    attributed excesses use limit·(1 − limit), as the persona excess does)."""
    d = np.asarray(differences, dtype=float)
    n = int(d.size)
    if n < 2:
        estimate = float(d.mean()) if n else None
        return ChangeEvidence(method, n, estimate, None, None, enough_cases=False)
    mean = math.fsum(d.tolist()) / n
    sd = float(d.std(ddof=1))
    spread = math.sqrt(max(sd * sd, floor_variance))
    t = student_t_quantile(1.0 - ALPHA, n - 1)
    se = spread / math.sqrt(n)
    if se == 0.0:
        p_above = 0.0 if mean > limit else 1.0
        p_below = 0.0 if mean < limit else 1.0
    else:
        p_above = student_t_sf((mean - limit) / se, n - 1)
        p_below = student_t_sf((limit - mean) / se, n - 1)
    gap = abs(mean - limit)
    needed = None if gap == 0.0 or spread == 0.0 else max(
        MIN_CASES, math.ceil(((t * spread) / gap) ** 2))
    return ChangeEvidence(
        method, n, mean, _clip(mean - t * se, span), _clip(mean + t * se, span),
        p_above=p_above, p_below=p_below, cases_needed=needed,
        detectable=(t + _Z_POWER) * se, enough_cases=n >= MIN_CASES,
    )


def zero_count(occurrences: int, n: int, noise: float | None = None) -> ChangeEvidence:
    """A limit-0 gate as a count: one occurrence fails; 0 of n holds, shown with its exact
    one-sided 95 % upper bound 1 − 0.05^(1/n)."""
    if occurrences:
        return ChangeEvidence(f"count, {occurrences} of {n}", n, occurrences / n, None, None,
                              noise=noise, counted="fails")
    high = 1.0 - ALPHA ** (1.0 / n) if n else None
    return ChangeEvidence(f"exact (Clopper-Pearson), 0 of {n}", n, 0.0, 0.0, high,
                          noise=noise, counted="holds" if n else "not_established")


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
    ) -> None:
        """`before`/`after`: compared × labels probabilities; `expected` label index (−1
        unlabeled); `errored_*`: every matched case's error flags (the error-rate change);
        `placebo`: per compared case, from the runs' reruns (None: no noise measured)."""
        self.before, self.after, self.expected = before, after, expected
        self.placebo = placebo
        self.errored_before, self.errored_after = errored_before, errored_after
        self.bins = calibration_bins
        shift = compare(before, after, relation="invariant", decision_type="choice")
        self.flip = shift.flipped.astype(float)
        self.tv = shift.tv
        self.confidence = np.abs(shift.confidence_delta)
        self.labeled = expected >= 0
        self.scores_before = case_scores(before, expected)
        self.scores_after = case_scores(after, expected)

    @property
    def noise_measured(self) -> bool:
        return self.placebo is not None and bool(self.placebo.measured.any())

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

    def _proportion_drop(self, rows: np.ndarray, limit: float) -> ChangeEvidence:
        correct_before = self.scores_before[0][rows] == 1.0
        correct_after = self.scores_after[0][rows] == 1.0
        b = int((correct_before & ~correct_after).sum())
        c = int((~correct_before & correct_after).sum())
        return self._tango(b, c, int(rows.size), limit, self._floor("correct", rows))

    def _tango(self, b: int, c: int, n: int, limit: float, noise: float | None
               ) -> ChangeEvidence:
        found = paired_proportions(b, c, n, limit)
        return ChangeEvidence(
            TANGO, n, found.estimate, found.low, found.high, p_above=found.p_above,
            p_below=found.p_below, cases_needed=found.cases_needed,
            detectable=found.detectable, noise=noise, enough_cases=n > 0,
            details={"newly_worse": b, "newly_better": c, "mcnemar_p": found.mcnemar_p},
        )

    def _floor(self, score: str, rows: np.ndarray) -> float | None:
        if self.placebo is None:
            return None
        squared = {"correct": self.placebo.correct_sq, "brier": self.placebo.brier_sq,
                   "nll": self.placebo.nll_sq}[score]
        return _noise_floor(squared[rows], int(rows.size))

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
            return zero_count(newly, n)
        return self._tango(newly, recovered, n, limit, None)

    def _paired_mean(self, index: int, limit: float, span: float, score: str
                     ) -> ChangeEvidence:
        rows = np.flatnonzero(self.labeled)
        change = self.scores_after[index][rows] - self.scores_before[index][rows]
        found = mean_change(change, limit, span=span)
        return replace(found, noise=self._floor(score, rows))

    def brier_increase(self, limit: float) -> ChangeEvidence:
        return self._paired_mean(1, limit, 2.0, "brier")

    def nll_increase(self, limit: float) -> ChangeEvidence:
        return self._paired_mean(2, limit, NLL_SPAN, "nll")

    def _attributed(self, raw: np.ndarray, noise: np.ndarray | None, limit: float
                    ) -> ChangeEvidence | None:
        """Mean of (raw − placebo) over the cases with reruns; None without reruns."""
        if self.placebo is None or noise is None or not self.placebo.measured.any():
            return None
        rows = np.flatnonzero(self.placebo.measured)
        placebo_mean, raw_mean = float(noise[rows].mean()), float(raw[rows].mean())
        if limit == 0.0 and not raw.any():
            return replace(zero_count(0, int(raw.size), placebo_mean), raw=raw_mean)
        excess = raw[rows] - noise[rows]
        floor = limit * (1.0 - limit)
        found = mean_change(excess, limit, span=1.0, method=ATTRIBUTED, floor_variance=floor)
        return replace(found, noise=placebo_mean, raw=raw_mean)

    def attributed_flips(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.flip, None if self.placebo is None
                                else self.placebo.flip, limit)

    def attributed_tv(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.tv, None if self.placebo is None
                                else self.placebo.tv, limit)

    def attributed_confidence(self, limit: float) -> ChangeEvidence | None:
        return self._attributed(self.confidence, None if self.placebo is None
                                else self.placebo.confidence, limit)

    def _bootstrap(self, found: BootstrapChange, sign: float, limit: float
                   ) -> ChangeEvidence:
        """Bounds of sign·change; cases needed n·(z·sd / gap)² at the observed spread."""
        if found.estimate is None or found.low is None or found.high is None:
            return ChangeEvidence(BOOTSTRAP, found.n, None, None, None, enough_cases=False)
        low, high = (found.low, found.high) if sign > 0 else (-found.high, -found.low)
        estimate, sd = sign * found.estimate, found.sd or 0.0
        gap = abs(estimate - limit)
        needed = None if gap == 0.0 or sd == 0.0 else max(
            BOOTSTRAP_MIN_CASES, math.ceil(found.n * (_Z * sd / gap) ** 2))
        notes = () if found.enough_cases else (
            f"the bootstrap needs at least {BOOTSTRAP_MIN_CASES} cases",)
        return ChangeEvidence(
            BOOTSTRAP, found.n, estimate, _clip(low, 1.0), _clip(high, 1.0),
            cases_needed=needed, detectable=(_Z + _Z_POWER) * sd,
            enough_cases=found.enough_cases, notes=notes,
            details={"resamples": found.resamples},
        )

    def ece_increase(self, limit: float) -> ChangeEvidence:
        rows = np.flatnonzero(self.labeled)
        before, after = self.before[rows], self.after[rows]
        found = ece_change(
            before.max(axis=1), self.scores_before[0][rows] == 1.0,
            after.max(axis=1), self.scores_after[0][rows] == 1.0, self.bins,
        )
        return self._bootstrap(found, 1.0, limit)

    def macro_f1_drop(self, limit: float) -> ChangeEvidence:
        rows = np.flatnonzero(self.labeled)
        found = macro_f1_change(
            self.expected[rows], np.argmax(self.before[rows], axis=1),
            np.argmax(self.after[rows], axis=1), self.before.shape[1],
        )
        return self._bootstrap(found, -1.0, limit)

    def segment_drops(self, segments: Sequence[SegmentRows], limit: float
                      ) -> list[tuple[SegmentRows, ChangeEvidence]]:
        """The accuracy drop of each gated segment with Holm-adjusted p-values on each
        side (`details.holm_above`, `details.holm_below`)."""
        gated = [s for s in segments if s.gated]
        found = [self._proportion_drop(s.rows[self.labeled[s.rows]], limit) for s in gated]
        above = holm([1.0 if e.p_above is None else e.p_above for e in found])
        below = holm([1.0 if e.p_below is None else e.p_below for e in found])
        return [
            (segment, replace(evidence, details={**evidence.details, "holm_above": a,
                                                 "holm_below": b}))
            for segment, evidence, a, b in zip(gated, found, above, below, strict=True)
        ]
