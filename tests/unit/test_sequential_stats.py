"""The sequential evidence keeps its error rate whenever a run stops: computed exactly or
simulated, seeded.

- 0/1 gates (the hypergeometric e-process): the exact chance of a wrong verdict, by dynamic
  programming over every stopping point of a 1,500-case suite (and smaller ones), with the
  suite's count exactly at the limit (a FAIL would be wrong) and one above it (a PASS would
  be wrong): ≤ α. The naive rule, a one-sided 95 % Wilson bound re-checked after every
  case, fails the same computation, so a regression to it is caught.
- bounded per-case gates (the bettors): 10,000 seeded runs per scenario at the boundary,
  0/1, all-or-nothing clustered (every variant of a case violates or none does), ratios
  with cases that do not count (errors) and continuous values: wrong verdicts ≤ α + 3 SE.

Run as a script (`python -m tests.unit.test_sequential_stats`) to print the figures
recorded in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from decflow.metrics.sequential import (
    Hypergeometric,
    RatioGate,
    betting_log_capital,
    evaluate,
    split_alpha,
)

ALPHA = 0.05


def wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """The Wilson score interval the naive re-check used (decflow no longer ships it)."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    margin = z * math.sqrt((p * (1 - p) + z2 / (4 * n)) / n) / (1 + z2 / n)
    return max(0.0, centre - margin), min(1.0, centre + margin)
RUNS = 10_000
Decider = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]


def wrong_verdicts(population: int, ones: int, decide: Decider) -> tuple[float, float]:
    """(P(FAIL first), P(PASS first)) when the suite holds `ones` ones among `population`
    cases drawn in a uniformly random order, checked after every case: the distribution of
    the count drawn so far is carried forward exactly, and mass leaves at a verdict."""
    alive = np.zeros(population + 1)
    alive[0] = 1.0
    failed = passed = 0.0
    for drawn in range(population):
        seen = np.arange(drawn + 1)
        remaining = population - drawn
        up = alive[: drawn + 1] * np.clip(ones - seen, 0, None) / remaining
        down = alive[: drawn + 1] * np.clip(population - ones - (drawn - seen), 0, None) / remaining
        step = np.zeros(population + 1)
        step[1 : drawn + 2] += up
        step[: drawn + 1] += down
        fail, pass_ = decide(drawn + 1, np.arange(drawn + 2))
        now = step[: drawn + 2]
        failed += float(now[fail].sum())
        passed += float(now[pass_ & ~fail].sum())
        now[fail | pass_] = 0.0
        alive = step
    return failed, passed


def hypergeometric_decider(population: int, k_pass: int, alpha: float) -> Decider:
    """The rule `evaluate` applies to a 0/1 gate, as thresholds on the count of ones (the
    e-values are monotone in it), plus the verdicts the unseen cases cannot change."""
    model = Hypergeometric(population)
    threshold = math.log(1 / alpha)
    fail_from = np.zeros(population + 1, dtype=np.int64)
    pass_upto = np.zeros(population + 1, dtype=np.int64)
    for drawn in range(1, population + 1):
        lo, hi = 0, drawn + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if mid <= drawn and model.log_evidence(drawn, mid, k_pass, "fail") >= threshold:
                hi = mid
            else:
                lo = mid + 1
        fail_from[drawn] = lo
        lo, hi = -1, drawn
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if model.log_evidence(drawn, mid, k_pass, "pass") >= threshold:
                lo = mid
            else:
                hi = mid - 1
        pass_upto[drawn] = lo

    def decide(drawn: int, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fail = (ones >= fail_from[drawn]) | (ones > k_pass)
        pass_ = (ones <= pass_upto[drawn]) | (ones + population - drawn <= k_pass)
        return fail, pass_ & ~fail

    return decide


def wilson_decider(population: int, k_pass: int, limit: float) -> Decider:
    """The naive rule: one-sided 95 % Wilson bounds (z = 1.645) re-checked after each case."""
    bounds = np.vectorize(lambda k, n: wilson(int(k), int(n), 1.645), otypes=[float, float])

    def decide(drawn: int, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        low, high = bounds(ones, drawn)
        fail = (low > limit) | (ones > k_pass)
        pass_ = (high < limit) | (ones + population - drawn <= k_pass)
        return fail, pass_ & ~fail

    return decide


def exact_sizes(population: int, limit: float, naive: bool = False) -> tuple[float, float]:
    """(false FAIL with the count at the limit, false PASS with one more)."""
    gate = RatioGate(limit, "<=", population, binary=True)
    k_pass = gate.holds_count()
    decide = (wilson_decider(population, k_pass, limit) if naive
              else hypergeometric_decider(population, k_pass, ALPHA))
    false_fail, _ = wrong_verdicts(population, k_pass, decide)
    _, false_pass = wrong_verdicts(population, k_pass + 1, decide)
    return false_fail, false_pass


@pytest.mark.parametrize(("population", "limit"), [(1500, 0.05), (200, 0.02), (300, 0.15)])
def test_binary_gate_exact_size_at_the_limit(population: int, limit: float) -> None:
    false_fail, false_pass = exact_sizes(population, limit)
    assert false_fail <= ALPHA
    assert false_pass <= ALPHA


def test_naive_wilson_recheck_fails_the_same_computation() -> None:
    false_fail, _false_pass = exact_sizes(1500, 0.05, naive=True)
    assert false_fail > 4 * ALPHA


def monte_carlo(num: np.ndarray, den: np.ndarray, gate: RatioGate, claim: str,
                seed: int, runs: int = RUNS) -> float:
    """Share of seeded random orders in which the wrong claim's bettor reaches 1/α before
    the last case (at the last case the suite's own value decides)."""
    rng = np.random.default_rng(seed)
    threshold = math.log(1 / ALPHA)
    population = len(num)
    wrong = 0
    for start in range(0, runs, 2000):
        size = min(2000, runs - start)
        order = np.argsort(rng.random((size, population)), axis=1)
        x = gate.per_case(num[order], den[order], gate.limit)
        capital = betting_log_capital(x, gate.zero_point(gate.limit), claim,  # type: ignore[arg-type]
                                      population)
        wrong += int((capital[:, :-1].max(axis=1) >= threshold).sum())
    return wrong / runs


def boundary_scenarios() -> dict[str, tuple[np.ndarray, np.ndarray, RatioGate, str]]:
    """Suites whose full-run value sits exactly at (or just past) the limit."""
    n = 400
    rng = np.random.default_rng(7)
    ones = np.zeros(n)
    ones[:20] = 1.0
    one_more = ones.copy()
    one_more[20] = 1.0
    # All-or-nothing: 3 or 5 variants per case, 16 five-variant cases violate in full:
    # 80 of 1,600 variants, exactly 0.05.
    variants = np.where(np.arange(n) % 2 == 0, 3.0, 5.0)
    clustered = np.zeros(n)
    clustered[np.flatnonzero(variants == 5.0)[:16]] = 5.0
    # Brier-like values in [0, 2] with mean exactly 0.2.
    brier = rng.beta(0.5, 3.0, n) * 2.0
    brier = np.clip(brier * (0.2 * n / brier.sum()), 0.0, 2.0)
    # Accuracy over the cases that did not error (10 errored), exactly at the limit.
    labeled = np.ones(n)
    labeled[:10] = 0.0
    right = np.zeros(n)
    right[10:350] = 1.0
    accuracy = float(right.sum() / labeled.sum())
    return {
        "0/1 at the limit": (ones, np.ones(n), RatioGate(0.05, "<=", n), "fail"),
        "0/1 one above the limit": (one_more, np.ones(n), RatioGate(0.05, "<=", n), "pass"),
        "all-or-nothing clusters at the limit": (
            clustered, variants, RatioGate(0.05, "<=", n, den_max=5.0), "fail"),
        "continuous at the limit": (
            brier, np.ones(n), RatioGate(float(brier.mean()), "<=", n, num_per_den=2.0), "fail"),
        "ratio with errors at the limit": (
            right, labeled, RatioGate(accuracy, ">=", n), "fail"),
    }


@pytest.mark.parametrize("name", list(boundary_scenarios()))
def test_bounded_gate_error_at_the_boundary(name: str) -> None:
    num, den, gate, claim = boundary_scenarios()[name]
    rate = monte_carlo(num, den, gate, claim, seed=sum(map(ord, name)))
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)


def test_interval_closes_on_the_suite_value_at_the_last_case() -> None:
    rng = np.random.default_rng(1)
    num = (rng.random(300) < 0.1).astype(float)
    den = np.ones(300)
    binary = evaluate(RatioGate(0.1, "<=", 300, binary=True), num, den, ALPHA)
    assert binary.low == binary.high == num.mean()
    values = rng.random(300)
    bounded = evaluate(RatioGate(0.5, "<=", 300), values, den, ALPHA)
    assert bounded.low == pytest.approx(values.mean(), abs=1e-9)
    assert bounded.high == pytest.approx(values.mean(), abs=1e-9)
    assert bounded.decision == ("pass" if values.mean() <= 0.5 else "fail")
    assert bounded.reason == "certain"


def test_unseen_cases_that_cannot_change_the_verdict_decide_it() -> None:
    gate = RatioGate(0.0, "<", 1000, binary=True)
    one_error = evaluate(gate, np.array([0.0, 1.0]), np.ones(2), ALPHA)
    assert (one_error.decision, one_error.reason) == ("fail", "certain")
    accuracy = RatioGate(0.5, ">=", 10)
    # 6 right of 6 seen: at least 6 of 10 whatever comes; 4 of 4 could end at 4 of 10.
    assert evaluate(accuracy, np.ones(6), np.ones(6), ALPHA).reason == "certain"
    assert evaluate(accuracy, np.ones(4), np.ones(4), ALPHA).reason != "certain"


def test_clear_suites_are_decided_early_and_interval_covers() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    alpha = split_alpha(ALPHA, 4)
    flips = np.zeros(n)
    flips[rng.choice(n, 20, replace=False)] = 1.0  # 1 % against a 5 % limit
    evidence = evaluate(RatioGate(0.05, "<=", n), flips[:400], np.ones(400), alpha)
    assert evidence.decision == "pass"
    assert evidence.low is not None and evidence.high is not None
    assert evidence.low <= flips.mean() <= evidence.high < 0.05
    wrong = np.zeros(n)
    wrong[rng.choice(n, 600, replace=False)] = 1.0  # 30 % against 5 %: fails within 100
    evidence = evaluate(RatioGate(0.05, "<=", n), wrong[:100], np.ones(100), alpha)
    assert evidence.decision == "fail"
    assert evidence.low is not None and evidence.low > 0.05


def test_hypergeometric_bounds_contain_the_count() -> None:
    model = Hypergeometric(500)
    low, high = model.bounds(100, 10, ALPHA)
    assert low < 50 < high
    assert model.bounds(500, 37, ALPHA) == (37, 37)


if __name__ == "__main__":
    for population, limit in [(1500, 0.05), (200, 0.02), (300, 0.15)]:
        ff, fp = exact_sizes(population, limit)
        print(f"hypergeometric N={population} limit={limit}: false FAIL {ff:.4f}, "
              f"false PASS {fp:.4f}")
    ff, fp = exact_sizes(1500, 0.05, naive=True)
    print(f"naive Wilson re-check N=1500 limit=0.05: false FAIL {ff:.4f}, false PASS {fp:.4f}")
    for name, (num, den, gate, claim) in boundary_scenarios().items():
        rate = monte_carlo(num, den, gate, claim, seed=sum(map(ord, name)))
        print(f"{name}: wrong {claim.upper()} {rate:.4f} of {RUNS}")


def test_ece_bounds_close_on_the_suite_value_and_catch_miscalibration() -> None:
    from decflow.metrics.sequential import BinnedGaps

    rng = np.random.default_rng(3)
    n, bins = 400, 5
    confidence = rng.uniform(0.5, 1.0, n)
    right = (rng.random(n) < confidence).astype(float)  # calibrated
    which = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    gaps = right - confidence
    suite = sum(abs(gaps[which == b].sum()) for b in range(bins)) / n
    gate = BinnedGaps(0.1, bins, n)
    low, high = gate.bounds(which, gaps, ALPHA)
    assert low == pytest.approx(suite, abs=1e-6) and high == pytest.approx(suite, abs=1e-6)
    for seen in (50, 150, 300):
        low, high = gate.bounds(which[:seen], gaps[:seen], ALPHA)
        assert low <= suite <= high
    overconfident = np.zeros(n)  # always wrong at confidence 0.5-1: ECE ≈ 0.75
    found, low, _high = gate.decision(which[:40], (overconfident - confidence)[:40], ALPHA)
    assert found == "fail" and low > 0.1
