"""Sequential evidence for the gates that are not one ratio of per-case sums.

Each is assembled from the ratio gates and e-processes of `decflow.metrics.sequential` (no
second confidence-sequence implementation) and answers one question after the first `sent`
cases of a run's order: is the gate decided, how, with which e-values, and (for the report)
within which time-uniform bounds does the gated number lie.

- `ModalShare` (blindness): a suite is blind when its most common label's share reaches the
  threshold, which is when *some* label's share does. Blind is shown when one label's share
  is shown ≥ the threshold, at α/C per label (Bonferroni over the C labels: under "not
  blind" any of them could err); not blind when every label's share is shown below it, at α
  each (under "blind" only the label that is modal can make that claim wrong).
- `MacroF1`: each label's F1 is a ratio of per-case sums, 2·TP / (predicted + true), so it
  has time-uniform bounds; at α/C per label and side (Bonferroni) the macro-F1, the mean
  over the labels present in the suite, lies between the means of the bounds, taken over
  the labels present so far plus any label the unseen cases could still bring in, at its
  least or most favourable. PASS when the lower bound reaches the limit, FAIL when the upper
  bound is below it.
- `Exceedance` (`max_latency_p95_ms`): the percentile is at most L exactly when few enough
  cases are slower than L, a count of 0/1 cases (the hypergeometric e-process, exact).
- `BinnedEce`: the ECE gate (`BinnedGaps`) over the cases sent.

Bounds that cost a bisection per label or bin (`costly`) are looked at when the cases sent
grew by a tenth; fewer looks keep every guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt

from decflow.metrics.case_rates import Thresholds
from decflow.metrics.golden_cases import CaseValues
from decflow.metrics.golden_metrics import calibration_bin_index
from decflow.metrics.numeric import percentiles
from decflow.metrics.sequential import (
    BinnedGaps,
    Decision,
    GateEvidence,
    Hypergeometric,
    Planned,
    RatioGate,
    assumed_rates,
    betting_log_capital,
    evaluate,
    ratio_bounds,
    running_max,
)

Floats = npt.NDArray[np.float64]
Indices = npt.NDArray[np.int64]

SUITE_PROMISE = "the full run's verdict, with probability at least 1 - alpha per gate"
MODEL_PROMISE = ("a verdict about the model's rate, wrong with probability at most alpha per "
                 "gate; not necessarily the full run's status")


class Composite(Protocol):
    """A gate's sequential evidence over the first `sent` cases of the run's order."""

    @property
    def method(self) -> str: ...

    @property
    def costly(self) -> bool: ...

    @property
    def promise(self) -> str:
        """What the sequential verdict promises: the full run's (SUITE_PROMISE) or a
        verdict about the model (MODEL_PROMISE)."""
        ...

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence: ...


Reason = Literal["evidence", "certain"] | None


def _reason(decision: Decision | None, certain: bool) -> Reason:
    if decision is None:
        return None
    return "certain" if certain else "evidence"


@dataclass(frozen=True, eq=False)
class ModalShare:
    """Blindness: the largest share of one label among the counted cases, against a
    threshold it must stay below. `label_of` holds each case's label index (−1: the case
    does not count: it errored, or its input repeats an earlier case's)."""

    threshold: float
    labels: int
    population: int
    label_of: Indices
    method: ClassVar[str] = ("per-label confidence sequences without replacement "
                             "(Bonferroni for blind)")
    costly: ClassVar[bool] = False
    promise: ClassVar[str] = SUITE_PROMISE

    def _gate(self) -> RatioGate:
        return RatioGate(self.threshold, "<", self.population)

    def _shares(self, sent: int) -> tuple[Floats, list[Floats]]:
        which = self.label_of[:sent]
        return ((which >= 0).astype(np.float64),
                [(which == c).astype(np.float64) for c in range(self.labels)])

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        den, nums = self._shares(sent)
        gate = self._gate()
        found = [evaluate(gate, num, den, alpha, interval=False) for num in nums]
        threshold = math.log(1.0 / alpha)
        sure_blind = [f.reason == "certain" and f.decision == "fail" for f in found]
        sure_clear = [f.reason == "certain" and f.decision == "pass" for f in found]
        # The e-value of "some label reaches the threshold", Bonferroni over the labels.
        log_fail = max(f.log_e_fail for f in found) - math.log(self.labels)
        log_pass = min(f.log_e_pass for f in found)
        decision: Decision | None = None
        if any(sure_blind) or log_fail >= threshold:
            decision = "fail"
        elif all(sure or f.log_e_pass >= threshold
                 for sure, f in zip(sure_clear, found, strict=True)):
            decision = "pass"
        counted = float(den.sum())
        estimate = max(float(num.sum()) for num in nums) / counted if counted else None
        low = high = None
        if interval and sent:
            low = max(ratio_bounds(gate, num, den, alpha / self.labels)[0] for num in nums)
            high = max(ratio_bounds(gate, num, den, alpha)[1] for num in nums)
        certain = any(sure_blind) if decision == "fail" else all(sure_clear)
        return GateEvidence(sent, estimate, low, high, log_fail, log_pass, decision,
                            _reason(decision, certain))


def macro_bounds(lows: Floats, highs: Floats, present: npt.NDArray[np.bool_],
                 possible: npt.NDArray[np.bool_]) -> tuple[float, float]:
    """Bounds on the mean of per-label values over the labels present at the end: those
    `present` already, plus any of the `possible` ones, whichever set makes the mean
    smallest (or largest)."""

    def extreme(values: Floats, lowest: bool) -> float:
        chosen = list(values[present])
        extra = sorted(values[possible & ~present], reverse=not lowest)
        if not chosen and not extra:
            return 0.0 if lowest else 1.0
        if not chosen:
            chosen.append(extra.pop(0))
        for value in extra:
            mean = sum(chosen) / len(chosen)
            if (value < mean) if lowest else (value > mean):
                chosen.append(value)
        return float(sum(chosen) / len(chosen))

    return extreme(lows, True), extreme(highs, False)


@dataclass(frozen=True, eq=False)
class MacroF1:
    """`min_macro_f1`: the mean over present labels of 2·TP / (predicted + true), over the
    labeled, decided cases (`truth`, `predicted`: label indices, −1 when the case does not
    count)."""

    limit: float
    labels: int
    population: int
    truth: Indices
    predicted: Indices
    method: ClassVar[str] = "per-label F1 confidence sequences without replacement (Bonferroni)"
    costly: ClassVar[bool] = True
    promise: ClassVar[str] = SUITE_PROMISE

    def _per_label(self, sent: int) -> list[tuple[Floats, Floats]]:
        truth, predicted = self.truth[:sent], self.predicted[:sent]
        counted = (truth >= 0) & (predicted >= 0)
        out = []
        for k in range(self.labels):
            is_true, is_predicted = counted & (truth == k), counted & (predicted == k)
            out.append(((2.0 * (is_true & is_predicted)).astype(np.float64),
                        is_true.astype(np.float64) + is_predicted.astype(np.float64)))
        return out

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        gate = RatioGate(0.0, "<=", self.population, den_max=2.0)
        per_label = self._per_label(sent)
        bounds = np.array([ratio_bounds(gate, num, den, alpha / self.labels)
                           for num, den in per_label]).reshape(self.labels, 2)
        present = np.array([den.sum() > 0 for _, den in per_label])
        possible = np.full(self.labels, sent < self.population)
        low, high = macro_bounds(bounds[:, 0], bounds[:, 1], present, possible)
        decision: Decision | None = ("pass" if low >= self.limit else
                                     "fail" if high < self.limit else None)
        f1 = [float(num.sum() / den.sum()) for num, den in per_label if den.sum() > 0]
        estimate = float(np.mean(f1)) if f1 else None
        return GateEvidence(sent, estimate, low, high, 0.0, 0.0, decision,
                            _reason(decision, False))


def percentile_counts(cases: int, percent: float) -> tuple[int, int]:
    """For `cases` values and the percentile by linear interpolation at rank
    (cases − 1)·percent/100 (`decflow.metrics.numeric.percentiles`): (the most values above
    a limit with which the percentile is surely ≤ it, the fewest with which it is surely
    above). Between them lies the tie: one count, when the rank is fractional, at which
    the two values the interpolation straddles decide."""
    position = (cases - 1) * percent / 100.0
    low = math.floor(position)
    fractional = position > low
    return cases - 1 - low - int(fractional), cases - low


@dataclass(frozen=True, eq=False)
class Exceedance:
    """`max_latency_p95_ms`-like gates: a percentile of the decided cases' values against a
    limit, as the count of cases slower than it. `values` is NaN where the case errored
    (it has no latency, and the percentile leaves it out).

    The suite's count of decided cases is unknown until the end, so each side counts
    errored cases the way that can only make it slower to decide: the PASS side counts them
    as slow (with N − E decided cases, K slow: K + E ≤ the holding count for N implies
    K ≤ the holding count for N − E, because that count grows by at most one a case), the
    FAIL side as fast (the failing count never falls as cases are added). The tie count is
    decided only by the full suite."""

    limit: float
    percent: float
    population: int
    values: Floats
    method: ClassVar[str] = ("hypergeometric confidence sequences on the count of cases "
                             "above the limit")
    costly: ClassVar[bool] = False
    promise: ClassVar[str] = SUITE_PROMISE
    counts: tuple[int, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", percentile_counts(self.population, self.percent))

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        values = self.values[:sent]
        decided = ~np.isnan(values)
        slow = decided & (np.nan_to_num(values, nan=-math.inf) > self.limit)
        holds_upto, fails_from = self.counts
        model = Hypergeometric(self.population)
        slow_count = int(slow.sum())
        slow_or_errored = int((slow | ~decided).sum())
        log_fail = model.log_evidence(sent, slow_count, fails_from - 1, "fail")
        log_pass = model.log_evidence(sent, slow_or_errored, holds_upto, "pass")
        threshold = math.log(1.0 / alpha)
        decision: Decision | None = None
        certain = False
        if slow_count >= fails_from:
            decision, certain = "fail", True
        elif slow_or_errored + self.population - sent <= holds_upto:
            decision, certain = "pass", True
        elif log_fail >= threshold:
            decision = "fail"
        elif log_pass >= threshold:
            decision = "pass"
        estimate = percentiles(values[decided], [self.percent])[0] if decided.any() else None
        return GateEvidence(sent, estimate, None, None, log_fail, log_pass, decision,
                            _reason(decision, certain))


@dataclass(frozen=True, eq=False)
class BinnedEce:
    """`max_ece` over the cases sent: `which` holds each case's confidence bin (−1: the case
    does not count), `gaps` its right − confidence."""

    gate: BinnedGaps
    which: Indices
    gaps: Floats
    method: ClassVar[str] = "per-bin betting confidence sequences, without replacement (Bonferroni)"
    costly: ClassVar[bool] = True
    promise: ClassVar[str] = SUITE_PROMISE

    def estimate(self, sent: int) -> float | None:
        """The ECE of the cases sent (the same sum as the full run's)."""
        which, gaps = self.which[:sent], self.gaps[:sent]
        counted = int((which >= 0).sum())
        if not counted:
            return None
        return float(sum(abs(gaps[which == b].sum()) for b in np.unique(which[which >= 0]))
                     ) / counted

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        found, low, high = self.gate.decision(self.which[:sent], self.gaps[:sent], alpha)
        return GateEvidence(sent, self.estimate(sent), low, high, 0.0, 0.0, found,
                            _reason(found, False))


@dataclass(frozen=True, eq=False)
class SuiteRate:
    """A rate whose full-run verdict is a function of one sum over the suite (the stability
    meter: each complete case's share of flipped rerun pairs, `rate_test` on them): the
    sequential verdict is the full run's, settled from the cases sent.

    `values` holds each case's share (0 when it does not count), `counted` whether it counts
    (a complete case); `thresholds` are `rate_test`'s at the suite's N cases. With n ≤ N
    counted cases the full test fails from a sum at most the one at N and holds up to a sum
    at most one less per case left out (its p-values fall as the sum grows, rise as n grows
    with the sum fixed, and adding a case and a one to the sum never raises the failing
    one), so, with A the suite's sum of shares and B the same counting every case left out
    as 1:

    - FAIL when A > fail_above is shown, PASS when B < pass_below is shown;
    - not established (the full run's own verdict then) when B < fail_from and
      A > pass_to are both shown.

    Each of these four claims is a confidence sequence without replacement on a suite sum
    (the hypergeometric e-process for 0/1 values, betting otherwise) at α/4, so any wrong
    claim, whatever the suite, has probability ≤ α: the sequential status equals the full
    run's with probability ≥ 1 − α. Unlike a bettor on the model's rate, it decides a
    suite whose rate sits between the limit and where the full test decides (a grey zone)
    only by showing the full test's verdict there: not established.
    """

    thresholds: Thresholds
    population: int
    values: Floats
    counted: Floats
    binary: bool
    method: ClassVar[str] = ("confidence sequences without replacement on the suite's sum "
                             "against the full test's critical sums (alpha/4 per claim)")
    costly: ClassVar[bool] = False
    promise: ClassVar[str] = SUITE_PROMISE

    def _claim(self, values: Floats, at: float, sent: int, alpha: float, *,
               below: bool) -> tuple[bool, bool, float]:
        """Whether the suite's sum of `values` is shown above `at` (or, `below`, under it;
        for counts: at most `at` − 1) from the first `sent`: (shown, certain, log e)."""
        seen = values[:sent]
        total = float(seen.sum())
        unseen = self.population - sent
        certain = total + unseen < at if below else total > at
        if self.binary:
            k_pass = round(at) - 1 if below else round(at)
            log_e = Hypergeometric(self.population).log_evidence(
                sent, round(total), k_pass, "pass" if below else "fail")
        else:
            mean = min(max(at / self.population, 0.0), 1.0)
            log_e = running_max(betting_log_capital(seen, mean, "pass" if below else "fail",
                                                     self.population))
        return certain or log_e >= math.log(1.0 / alpha), certain, log_e

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        if not self.counted[:sent].any():
            # No complete case yet: which test the full run applies (the pairs a case has)
            # is not known, and nothing is claimed.
            return GateEvidence(sent, None, None, None, 0.0, 0.0, None, None)
        share = alpha / 4
        t = self.thresholds
        counted = self.values * self.counted
        worst = np.minimum(counted + (1.0 - self.counted), 1.0)
        fails, fails_surely, log_fail = self._claim(counted, t.fail_above, sent, share,
                                                    below=False)
        passes, passes_surely, log_pass = self._claim(worst, t.pass_below, sent, share,
                                                      below=True)
        decision: Decision | None = None
        certain = False
        if fails:
            decision, certain = "fail", fails_surely
        elif passes:
            decision, certain = "pass", passes_surely
        else:
            under, under_surely, _ = self._claim(worst, t.fail_from, sent, share, below=True)
            over, over_surely, _ = self._claim(counted, t.pass_to, sent, share, below=False)
            if under and over:
                decision, certain = "not_established", under_surely and over_surely
        den = self.counted[:sent]
        total = float(den.sum())
        estimate = float(counted[:sent].sum()) / total if total else None
        low = high = None
        if interval and total:  # the suite's rate, shown at α per side like every gate's
            low, high = ratio_bounds(RatioGate(0.0, "<=", self.population), counted[:sent],
                                     den, alpha)
        return GateEvidence(sent, estimate, low, high, log_fail, log_pass, decision,
                            _reason(decision, certain))


# The composites of the golden gates no per-case ratio decides, as the gate registry names
# them (`GoldenGate.composite`): (the cases' values, the gate's limit, the suite's size).
LATENCY_P95 = 95.0  # the percentile `max_latency_p95_ms` gates


def binned_ece_of(values: CaseValues, limit: float, population: int) -> Composite:
    labeled = values.labeled
    return BinnedEce(
        BinnedGaps(limit, values.calibration_bins, population),
        np.where(labeled, calibration_bin_index(values.confidence, values.calibration_bins),
                 -1),
        np.where(labeled, values.correct.astype(np.float64) - values.confidence, 0.0))


def macro_f1_of(values: CaseValues, limit: float, population: int) -> Composite:
    return MacroF1(limit, values.n_labels, population,
                   np.where(values.labeled, values.expected, -1),
                   np.where(values.decided, values.selected, -1))


def latency_p95_of(values: CaseValues, limit: float, population: int) -> Composite:
    return Exceedance(limit, LATENCY_P95, population,
                      np.where(values.decided, values.latency_ms, np.nan))


def macro_f1_plan(limit: float, cases: int, labels: int) -> Planned:
    """Macro-F1 planned as one label's F1 at the assumed rates, at α/labels a side."""
    good, bad = assumed_rates(limit, ">=")
    return Planned(RatioGate(limit, ">=", cases), good, bad, 1 / labels, 1 / labels,
                   "one label's F1")


def latency_p95_plan(limit: float, cases: int, labels: int) -> Planned:
    """The p95 latency planned as the share of cases slower than the limit against 5 %."""
    return Planned(RatioGate(0.05, "<=", cases, binary=True), 0.01, 0.2,
                   of="the share of cases slower than the limit")
