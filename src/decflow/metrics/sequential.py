"""Anytime-valid evidence for a gate while a suite is sampled without replacement.

A sequential run takes the suite's N cases in a seeded random order and, after every batch,
asks whether each gate is already decided. The target of a gate is the value the *full*
suite would give, a fixed number: inference is about a finite population sampled without
replacement, so evidence grows faster than for an endless stream and the interval closes
on the exact value at the last case (Waudby-Smith & Ramdas, "Confidence sequences for
sampling without replacement", NeurIPS 2020).

Every gate is a ratio of per-case sums, R = Σ num / Σ den (a plain mean has den = 1), with
each case's den in [0, d_max] and num in [0, u·den]. R ⋄ L holds exactly when the suite
mean of y = num − L·den is ≤ 0 (< 0 for a strict gate; with the sign turned for a `>=`
gate), so every decision is a test about the mean of one bounded value per case: the case is
the sampling unit, and the variants or reruns of a case never count as independent.

Two e-processes (nonnegative supermartingales under their null, so by Ville's inequality
the chance that one *ever* reaches 1/α is at most α, whenever the run looks and stops):

- `Hypergeometric`, for 0/1 values by construction (error shares, limit-0 shares): the
  likelihood of the order seen under a count K of ones, mixed over a uniform prior on the
  counts of the alternative side, against the most likely count of the null side. It
  depends only on (cases seen, ones seen), which lets the tests compute its exact error by
  dynamic programming over every stopping point.
- `betting_log_capital`, for bounded values: a bettor stakes a fixed fraction of the most
  it may on the next case against the null's conditional mean without replacement,
  m_t = (N·m − S_{t−1}) / (N − t + 1), and the capital is averaged over a grid of
  fractions (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
  betting", JRSS-B 2024: diversified Kelly). Its error is measured by Monte Carlo.

ECE, not a mean per case, is bounded through its bins (`BinnedGaps`).

Each gate gets α/(number of gates) (Bonferroni); within a gate each side gets all of it,
because for any true value only one side's claim can be wrong. A gate is also decided,
with certainty, once the cases not yet seen cannot change its verdict.

Pure numpy; decflow's own code rather than `confseq` (it pulls in scipy, matplotlib,
pandas and a C++ build, and grids the mean instead of testing the one limit a gate has) or
`expectation` (Python ≥ 3.12 only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Claim = Literal["fail", "pass"]
# "not_established": a tri-state verdict that can no longer become a pass or a fail (a
# persona axis without a placebo whose rate is shown below its limit).
Decision = Literal["fail", "pass", "not_established"]
Target = Literal["suite", "model"]
Floats = npt.NDArray[np.float64]

BET_FRACTIONS = np.array([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
"""Fractions of the largest safe bet the mixed bettors stake (the grid of diversified
Kelly): from cautious (long, noisy runs) to bold (a rate far from its limit, or no
occurrence at all)."""

_BISECTIONS = 48


def split_alpha(alpha: float, gates: int) -> float:
    """Each gate's share of the run's α (Bonferroni)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return alpha / max(gates, 1)


def null_means(x: Floats, null_mean: float, population: int | None) -> Floats:
    """The mean of case t (t = 1, 2, …) given the cases before it, if the suite's mean is
    `null_mean`: (N·m − S_{t−1}) / (N − t + 1); `null_mean` itself for an endless stream."""
    if population is None:
        return np.full(x.shape, null_mean)
    before = np.cumsum(x, axis=-1) - x
    remaining = population - np.arange(x.shape[-1])
    if np.any(remaining <= 0):
        raise ValueError(f"more values ({x.shape[-1]}) than the population ({population})")
    return (population * null_mean - before) / remaining


def betting_log_capital(
    x: npt.ArrayLike, null_mean: float, claim: Claim, population: int | None = None
) -> Floats:
    """Log capital after each value of a bettor against the suite mean of `x` (values in
    [0, 1], in the order seen; leading axes are independent runs).

    `claim` "fail" bets that the mean is above `null_mean` (the null is: mean ≤ null_mean),
    "pass" that it is below (null: mean ≥ null_mean). Under its null, at the boundary or
    beyond, the capital is a nonnegative supermartingale. Where the null's conditional mean
    leaves [0, 1] the suite already settles the question (see `certain`), and no bet is
    placed.
    """
    values = np.asarray(x, dtype=np.float64)
    means = null_means(values, null_mean, population)
    inside = (means > 0.0) & (means < 1.0)
    clipped = np.clip(means, 0.0, 1.0)
    if claim == "fail":
        gain, room = values - clipped, clipped
    else:
        gain, room = clipped - values, 1.0 - clipped
    # gain / room ≥ −1 for values in [0, 1]: a fraction c < 1 of the largest bet never
    # loses everything on one case.
    scaled = np.where(inside, gain / np.where(inside, room, 1.0), 0.0)
    scaled = np.maximum(scaled, -1.0)
    total: Floats | None = None
    for fraction in BET_FRACTIONS:
        path = np.cumsum(np.log1p(fraction * scaled), axis=-1)
        total = path if total is None else np.logaddexp(total, path)
    assert total is not None
    return total - math.log(len(BET_FRACTIONS))


def log_factorials(n: int) -> Floats:
    """log k! for k = 0 … n."""
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))))


class Hypergeometric:
    """Evidence about the number K of ones among N cases from the first t drawn (s ones)."""

    def __init__(self, population: int) -> None:
        if population < 1:
            raise ValueError(f"population must be ≥ 1, got {population}")
        self.population = population
        self._logf = log_factorials(population)

    def log_likelihood(self, counts: npt.NDArray[np.int64], drawn: int, ones: int) -> Floats:
        """log P(the order seen | K) for each K in `counts` (−inf where impossible)."""
        n, f = self.population, self._logf
        zeros = drawn - ones
        k = np.asarray(counts, dtype=np.int64)
        possible = (k >= ones) & (n - k >= zeros)
        k_ok = np.where(possible, k, ones)
        value = (f[k_ok] - f[k_ok - ones] + f[n - k_ok] - f[n - k_ok - zeros]
                 - f[n] + f[n - drawn])
        return np.where(possible, value, -np.inf)

    def log_evidence(self, drawn: int, ones: int, k_pass: int, claim: Claim) -> float:
        """log e-value against the null side of a gate that holds iff K ≤ `k_pass`.

        "fail" tests the null K ≤ k_pass (uniform prior on K > k_pass), "pass" the null
        K > k_pass (uniform prior on K ≤ k_pass). +inf when the draws rule the null out.
        """
        n = self.population
        low_side = np.arange(0, max(k_pass, -1) + 1)
        high_side = np.arange(max(k_pass + 1, 0), n + 1)
        alternative, null = (high_side, low_side) if claim == "fail" else (low_side, high_side)
        if not len(alternative):
            return -math.inf
        if not len(null):
            return math.inf
        mixed = self.log_likelihood(alternative, drawn, ones)
        best_null = float(np.max(self.log_likelihood(null, drawn, ones)))
        if best_null == -math.inf:
            return math.inf
        top = float(np.max(mixed))
        if top == -math.inf:
            return -math.inf
        return top + math.log(float(np.mean(np.exp(mixed - top)))) - best_null

    def bounds(self, drawn: int, ones: int, alpha: float) -> tuple[int, int]:
        """Time-uniform bounds on K, one-sided at level `alpha` each: the counts no test
        of this family rejects (low > high: it rejects every count, see `contradicted`)."""
        threshold = math.log(1.0 / alpha)
        low_k, high_k = ones, ones + self.population - drawn

        def rejects_below(k: int) -> bool:  # is "K ≤ k" rejected?
            return self.log_evidence(drawn, ones, k, "fail") >= threshold

        def rejects_above(k: int) -> bool:  # is "K ≥ k" rejected?
            return self.log_evidence(drawn, ones, k - 1, "pass") >= threshold

        # The lowest K whose "K ≤ K" is not rejected; the highest whose "K ≥ K" is not.
        lo, hi = low_k, high_k
        while lo < hi:
            mid = (lo + hi) // 2
            if rejects_below(mid):
                lo = mid + 1
            else:
                hi = mid
        lower = lo
        lo, hi = low_k, high_k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if rejects_above(mid):
                hi = mid - 1
            else:
                lo = mid
        return lower, lo


@dataclass(frozen=True)
class RatioGate:
    """A gate R ⋄ limit on R = Σ num / Σ den over the suite's `population` cases.

    Per case den ∈ [0, `den_max`] and num ∈ [`floor`·den, `num_per_den`·den] (`floor` −1:
    a difference of two shares). `binary`: num is 0 or 1 and den is 1 for every case, by
    construction (the hypergeometric e-process applies).

    `target` "suite": R is the value the whole suite would give, a fixed number; the
    bettors correct for sampling without replacement, the interval closes on it at the last
    case, and a verdict the unseen cases cannot change is certain. "model": R is the
    model's rate (the mean a fresh suite of such cases would have), the quantity decflow's
    tri-state diagnostic verdicts (stability, persona axes) are about: the cases are i.i.d.
    draws of it whatever order they are taken in, so the bettors bet against the limit
    itself (no finite-population correction, no certain verdict). Correcting for the
    finite suite there would close the interval on this suite's realized flips and call a
    model at its limit stochastic or deterministic by the last cases, where the full run's
    verdict stays not established.
    """

    limit: float
    comparison: Literal["<=", ">=", "<"]
    population: int
    num_per_den: float = 1.0
    den_max: float = 1.0
    binary: bool = False
    floor: float = 0.0
    target: Target = "suite"

    def __post_init__(self) -> None:
        if self.population < 1:
            raise ValueError("a gate needs at least one case")
        if self.num_per_den <= self.floor or self.den_max <= 0:
            raise ValueError("num_per_den must exceed floor, and den_max must be positive")
        if self.binary and (self.target != "suite" or self.floor != 0.0):
            raise ValueError("a binary gate counts ones in the suite")

    @property
    def finite(self) -> int | None:
        """The population the bettors correct for (None: the model's rate)."""
        return self.population if self.target == "suite" else None

    def per_case(self, num: Floats, den: Floats, at: float) -> Floats:
        """y, whose suite mean is ≤ 0 when R ⋄ `at` holds (as a mean of [0, 1] values)."""
        low, high = self.value_range(at)
        signed = num - at * den if self.comparison != ">=" else at * den - num
        return (signed - low) / (high - low)

    def value_range(self, at: float) -> tuple[float, float]:
        """The smallest and largest signed value (num − at·den, turned for `>=`) of a case."""
        top, bottom, d = self.num_per_den, self.floor, self.den_max
        if self.comparison == ">=":
            return -(top - at) * d, (at - bottom) * d
        return -(at - bottom) * d, (top - at) * d

    def zero_point(self, at: float) -> float:
        """Where the mean of `per_case` values sits when R equals `at`."""
        low, high = self.value_range(at)
        return -low / (high - low)

    def holds_count(self) -> int:
        """Binary gates: the largest count of ones with which the gate holds (−1: none)."""
        counts = np.arange(self.population + 1) / self.population
        if self.comparison == "<=":
            holding = counts <= self.limit
        elif self.comparison == "<":
            holding = counts < self.limit
        else:
            raise ValueError("a binary gate counts what must stay low (<= or <)")
        return int(np.flatnonzero(holding).max()) if holding.any() else -1


def assumed_rates(limit: float, direction: str) -> tuple[float, float]:
    """(clearly holds, clearly fails) for a rate gate, the rates a sequential plan assumes:
    a `<=` gate at a fifth of its limit and at four times it, a `>=` gate a third of the way
    from 1 and four times as far."""
    if direction == ">=":
        return 1 - (1 - limit) / 3, max(0.0, 1 - 4 * (1 - limit))
    return limit / 5, min(1.0, 4 * limit)


@dataclass(frozen=True)
class Planned:
    """How a sequential plan sizes a check: the ratio gate standing for it, the rates at
    which it clearly holds and clearly fails (None: at the first occurrence), the share of
    the gate's α each side gets, and what the rates are of when that is not the gated
    value."""

    gate: RatioGate
    holds_at: float
    fails_at: float | None
    pass_share: float = 1.0
    fail_share: float = 1.0
    of: str | None = None
    fail_gate: RatioGate | None = None  # the failing side's gate, when it is another


@dataclass(frozen=True)
class GateEvidence:
    """Where a gate stands after `n` of its suite's cases."""

    n: int
    estimate: float | None
    low: float | None
    high: float | None
    # log e-values of the two claims: the bettors' running maximum (a crossing at any case
    # so far counts), the hypergeometric's value now (its runs check after every batch).
    log_e_fail: float
    log_e_pass: float
    decision: Decision | None
    reason: Literal["evidence", "certain"] | None


def interval_label(alpha: float) -> str:
    """What a gate's bounds at `alpha` per gate are: ``time-uniform, 98.75% per side``
    (each side holds at every look with probability at least 1 − alpha)."""
    return f"time-uniform, {100 * (1 - alpha):.4g}% per side"


def contradicted(low: float | None, high: float | None) -> bool:
    """Bounds that cross: the confidence sequence has rejected every value (at most a
    chance α, or the cases were not exchangeable: answers that changed during the run)."""
    return low is not None and high is not None and low > high


def running_max(path: Floats) -> float:
    """The largest log capital of a bettor's path so far (0 before any case): a crossing at
    any case counts."""
    return float(np.max(path)) if path.size else 0.0


def _certain(gate: RatioGate, num: Floats, den: Floats) -> Decision | None:
    """The verdict the unseen cases can no longer change, if any (small margin for
    rounding: the full run's own arithmetic decides a tie at the last case); never for the
    model's rate, which no number of cases settles."""
    if gate.target == "model":
        return None
    seen = len(num)
    unseen = gate.population - seen
    low, high = gate.value_range(gate.limit)
    signed = np.sum(num - gate.limit * den) if gate.comparison != ">=" else np.sum(
        gate.limit * den - num)
    margin = 1e-9 * gate.population * max(high - low, 1.0)
    if signed + unseen * high < -margin:
        return "pass"
    if signed + unseen * low > margin:
        return "fail"
    return None


def _estimate(num: Floats, den: Floats) -> float | None:
    total = float(np.sum(den))
    return float(np.sum(num)) / total if total > 0 else None


def evaluate(gate: RatioGate, num: npt.ArrayLike, den: npt.ArrayLike, alpha: float,
             *, interval: bool = True) -> GateEvidence:
    """The gate's evidence from the per-case values seen so far, in the order seen."""
    num_a = np.asarray(num, dtype=np.float64)
    den_a = np.asarray(den, dtype=np.float64)
    n = len(num_a)
    threshold = math.log(1.0 / alpha)
    if gate.binary:
        ones = round(float(np.sum(num_a)))
        model = Hypergeometric(gate.population)
        k_pass = gate.holds_count()
        log_fail = model.log_evidence(n, ones, k_pass, "fail")
        log_pass = model.log_evidence(n, ones, k_pass, "pass")
    else:
        x = gate.per_case(num_a, den_a, gate.limit)
        zero = gate.zero_point(gate.limit)
        log_fail = running_max(betting_log_capital(x, zero, "fail", gate.finite))
        log_pass = running_max(betting_log_capital(x, zero, "pass", gate.finite))
    decision: Decision | None = None
    reason: Literal["evidence", "certain"] | None = None
    sure = _certain(gate, num_a, den_a)
    if sure is not None:
        decision, reason = sure, "certain"
    elif log_fail >= threshold:
        decision, reason = "fail", "evidence"
    elif log_pass >= threshold:
        decision, reason = "pass", "evidence"
    low = high = None
    if interval and n:
        if gate.binary:
            lo_k, hi_k = Hypergeometric(gate.population).bounds(n, ones, alpha)
            low, high = lo_k / gate.population, hi_k / gate.population
        else:
            low, high = ratio_bounds(gate, num_a, den_a, alpha, nonempty=False)
    return GateEvidence(n, _estimate(num_a, den_a), low, high, log_fail, log_pass,
                        decision, reason)


def ratio_bounds(gate: RatioGate, num: Floats, den: Floats, alpha: float, *,
                 nonempty: bool = True) -> tuple[float, float]:
    """Time-uniform bounds on R at level `alpha` per side (the values of R the bettors have
    not rejected), within what the unseen cases still allow. When every value is rejected
    (`contradicted`) they cross: as they are with `nonempty=False` (what a report shows),
    else the upper bound is raised to the lower (what composites combine)."""
    threshold = math.log(1.0 / alpha)
    top, bottom = gate.num_per_den, gate.floor
    # Tested as "R ≤ r" (a `<=` shape); the gate's own direction plays no part in R's bounds.
    shape = RatioGate(bottom, "<=", gate.population, gate.num_per_den, gate.den_max,
                      floor=bottom)

    def capital(r: float, claim: Claim) -> float:
        x = shape.per_case(num, den, r)
        return running_max(betting_log_capital(x, shape.zero_point(r), claim, gate.finite))

    lo, hi = bottom, top
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if capital(mid, "fail") >= threshold:
            lo = mid
        else:
            hi = mid
    lower = lo
    lo, hi = bottom, top
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if capital(mid, "pass") >= threshold:
            hi = mid
        else:
            lo = mid
    upper = max(hi, lower) if nonempty else hi
    logical = _logical_bounds(gate, num, den)
    return max(lower, logical[0]), min(upper, logical[1])


def _logical_bounds(gate: RatioGate, num: Floats, den: Floats) -> tuple[float, float]:
    """R's range whatever the unseen cases hold: all of them at den_max with num at its
    smallest, or with num at its largest (den 0 would leave the seen ratio, which lies
    between); for the model's rate, its whole range."""
    if gate.target == "model":
        return gate.floor, gate.num_per_den
    unseen_den = (gate.population - len(num)) * gate.den_max
    s_num, s_den = float(np.sum(num)), float(np.sum(den))
    if s_den + unseen_den <= 0:
        return gate.floor, gate.num_per_den
    total = s_den + unseen_den
    return ((s_num + gate.floor * unseen_den) / total,
            (s_num + gate.num_per_den * unseen_den) / total)


def cases_to_decide(gate: RatioGate, rate: float, alpha: float) -> int | None:
    """Cases until the evidence decides `gate` when each case's 0/1 value comes at `rate`,
    spread evenly (None: not before the last case)."""
    n = gate.population
    steps = np.arange(1, n + 1)
    ones = np.floor(rate * steps + 0.5)
    values = np.diff(np.concatenate(([0.0], ones)))
    threshold = math.log(1 / alpha)
    if gate.binary:
        model, k_pass = Hypergeometric(n), gate.holds_count()
        claim: Claim = "fail" if rate > gate.limit else "pass"
        for t in range(1, n):
            if model.log_evidence(t, int(ones[t - 1]), k_pass, claim) >= threshold:
                return t
        return None
    x = gate.per_case(values, np.ones(n), gate.limit)
    zero = gate.zero_point(gate.limit)
    holds = rate >= gate.limit if gate.comparison == ">=" else rate <= gate.limit
    path = betting_log_capital(x, zero, "pass" if holds else "fail", gate.finite)
    crossed = np.flatnonzero(path[:-1] >= threshold)
    return int(crossed[0]) + 1 if len(crossed) else None


@dataclass(frozen=True)
class BinnedGaps:
    """An ECE gate (ECE ≤ `limit`) over the suite's `population` cases.

    ECE = Σ_b |Σ_{i in b} gap_i| / (cases labeled), with gap = right − confidence of a
    labeled case in confidence bin b. Each bin's sum and the labeled count are means per
    case of values in [−1, 1] and [0, 1]: 2·`bins` + 2 one-sided bounds at α/(2·bins + 2)
    each (Bonferroni) bound the ECE from both sides at once; the lower bound decides a
    FAIL, the upper a PASS. The upper bound adds every bin's width, so a PASS before the
    last case needs a suite well calibrated in few bins."""

    limit: float
    bins: int
    population: int

    def bounds(self, bin_of: npt.ArrayLike, gaps: npt.ArrayLike,
               alpha: float) -> tuple[float, float]:
        """Time-uniform bounds on the suite's ECE from the cases seen (`bin_of` −1: the
        case does not count)."""
        which = np.asarray(bin_of, dtype=np.int64)
        gap = np.asarray(gaps, dtype=np.float64)
        share = alpha / (2 * self.bins + 2)
        mean = RatioGate(0.0, "<=", self.population)
        ones = np.ones(len(which))
        t_low, t_high = ratio_bounds(mean, (which >= 0).astype(np.float64), ones, share)
        low_sum = high_sum = 0.0
        for b in range(self.bins):
            shifted = (np.where(which == b, gap, 0.0) + 1.0) / 2.0
            lo, hi = ratio_bounds(mean, shifted, ones, share)
            lo, hi = 2 * lo - 1, 2 * hi - 1
            low_sum += max(0.0, lo, -hi)
            high_sum += max(abs(lo), abs(hi))
        low = min(low_sum / t_high, 1.0) if t_high > 0 else 0.0
        high = min(high_sum / t_low, 1.0) if t_low > 0 else 1.0
        return low, high

    def decision(self, bin_of: npt.ArrayLike, gaps: npt.ArrayLike,
                 alpha: float) -> tuple[Decision | None, float, float]:
        low, high = self.bounds(bin_of, gaps, alpha)
        found: Decision | None = "fail" if low > self.limit else (
            "pass" if high < self.limit else None)
        return found, low, high
