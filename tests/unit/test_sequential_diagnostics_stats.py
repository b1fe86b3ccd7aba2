"""The sequential diagnostics, macro-F1 and latency p95 keep their error rates whenever a run
stops: simulated with seeded draws, or computed exactly.

- persona axes are about the model's rate (`RatioGate(target="model")`): 10,000 seeded
  runs per scenario with the rate exactly at the limit, the cases drawn i.i.d. (the model's
  view) or a fixed suite in random order, all-or-nothing clustered (every cross pair of a
  case flips or none does) or spread: wrong verdicts on either side ≤ α + 3 SE, checked
  after every case. The same bettor corrected for the finite suite (what the suite's rate
  gates use) fails this test: it closes on the suite's realized flips and calls a model at
  its limit fair or unfair. (Stability settles the full run's verdict instead: `SuiteRate`,
  exact below.)
- stability with one rerun pair per case (`SuiteRate` on 0/1 values, four hypergeometric
  claims at α/4): the exact chance that the sequential status differs from the full run's,
  over every stopping point of a 120-case suite, at every count of flips.
- latency p95 (a count of slow cases with a tie): the exact chance of a wrong verdict over
  every stopping point of a 1,500-case suite, at the holding count, the tie and the failing
  count: ≤ α.
- blindness (the largest label share): 10,000 seeded orders of a suite exactly at the
  threshold (blind) and one case below it: wrong verdicts ≤ α + 3 SE.
- macro-F1: the bounds close on the suite's value at the last case and cover it at every
  look of seeded orders.

Run as a script (`python -m tests.unit.test_sequential_diagnostics_stats`) to print the
figures recorded in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np
import pytest

from decflow.metrics.bounded_mean import binomial_test
from decflow.metrics.case_rates import rate_thresholds
from decflow.metrics.numeric import percentiles
from decflow.metrics.sequential import RatioGate, betting_log_capital
from decflow.metrics.sequential_composite import (
    Exceedance,
    MacroF1,
    ModalShare,
    percentile_counts,
)
from decflow.pipeline.contract_run.sequential.diagnostics import stability_gate
from tests.unit.test_sequential_stats import hypergeometric_decider, wrong_verdicts

ALPHA = 0.05
EPSILON = 0.05  # the stability gate's limit
RUNS = 10_000
N = 400
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)
Draw = Callable[[np.random.Generator], np.ndarray]


def wrong_rates(values: np.ndarray, gate: RatioGate) -> tuple[float, float]:
    """(wrong FAIL, wrong PASS): the share of runs (rows of per-case values, in the order
    seen) in which the bettor against the gate holding (failing) reaches 1/α before the
    last case, for a gate whose quantity sits exactly at its limit."""
    x = gate.per_case(values, np.ones_like(values), gate.limit)
    zero = gate.zero_point(gate.limit)
    threshold = math.log(1 / ALPHA)
    out = []
    for claim in ("fail", "pass"):
        path = betting_log_capital(x, zero, claim, gate.finite)  # type: ignore[arg-type]
        out.append(float((path[:, :-1].max(axis=1) >= threshold).mean()))
    return out[0], out[1]


@cache
def model_scenarios() -> dict[str, tuple[np.ndarray, RatioGate]]:
    """Per-case values whose mean is exactly the limit, for the model (i.i.d. draws) or the
    suite (a fixed suite, random orders)."""
    rng = np.random.default_rng(11)
    eps, limit = 0.05, 0.05
    raw = RatioGate(eps, "<=", N, target="model")
    excess = RatioGate(limit, "<=", N, floor=-1.0, target="model")
    fixed = np.zeros(N)
    fixed[: round(eps * N)] = 1.0
    # Persona, all or nothing: every cross pair of a case flips (10 %) and independently
    # every placebo pair (5 %): the excess is exactly 0.05 in expectation.
    cross = (rng.random((RUNS, N)) < 0.10).astype(float)
    placebo = (rng.random((RUNS, N)) < 0.05).astype(float)
    # Persona, spread: 4 cross and 4 placebo pairs a case, flips at 0.15 and 0.10.
    cross4 = rng.binomial(4, 0.15, (RUNS, N)) / 4
    placebo4 = rng.binomial(4, 0.10, (RUNS, N)) / 4
    return {
        "raw cross share (no placebo), all or nothing, model at the limit": (
            (rng.random((RUNS, N)) < eps).astype(float), raw),
        "raw cross share, 3 independent pairs a case, model at the limit": (
            rng.binomial(3, eps, (RUNS, N)) / 3, raw),
        "raw cross share, a suite with exactly the limit flipping, random orders": (
            fixed[np.argsort(rng.random((RUNS, N)), axis=1)], raw),
        "persona excess, all or nothing, model at the limit": (cross - placebo, excess),
        "persona excess, 4 pairs a case, model at the limit": (cross4 - placebo4, excess),
    }


def suite_rate_disagreement(population: int) -> dict[int, float]:
    """Per count of flips in a `population`-case suite (one pair per case): the exact chance
    that `SuiteRate` decides otherwise than the full run's exact binomial test, checked after
    every case. Its decision depends on (cases sent, flips seen) only: tabled once with the
    gate's own code, then the counts' distribution is carried forward over the order."""
    ones_of = np.arange(population + 1)
    table = {}
    for drawn in range(1, population + 1):
        for seen in range(drawn + 1):
            values = np.r_[np.ones(seen), np.zeros(population - seen)]
            gate = stability_gate(EPSILON, population, values, np.ones(population), 1)
            table[drawn, seen] = gate.evidence(drawn, ALPHA, interval=False).decision
    out = {}
    for flips in ones_of:
        full = {"fails": "fail", "holds": "pass", "not_established": "not_established"}[
            binomial_test(int(flips), population, EPSILON).verdict()]
        alive = np.zeros(population + 1)
        alive[0] = 1.0
        wrong = 0.0
        for drawn in range(population):
            seen = np.arange(drawn + 1)
            remaining = population - drawn
            step = np.zeros(population + 1)
            step[1: drawn + 2] += alive[: drawn + 1] * np.clip(flips - seen, 0, None) / remaining
            step[: drawn + 1] += alive[: drawn + 1] * np.clip(
                population - flips - (drawn - seen), 0, None) / remaining
            for count in range(drawn + 2):
                decision = table[drawn + 1, count]
                if decision is not None and step[count] > 0:
                    wrong += step[count] * (decision != full)
                    step[count] = 0.0
            alive = step
        out[int(flips)] = wrong
    return out


def test_stability_claims_nothing_before_a_complete_case_and_counts_errors_against_it(
) -> None:
    n = 60
    errored = np.zeros(n)  # every case sent so far left out: a rerun errored
    gate = stability_gate(EPSILON, n, np.zeros(n), errored, 1)
    assert gate.evidence(30, ALPHA, interval=True).decision is None
    # 59 quiet complete cases of 60 would hold (0.95^59 < 0.05), but one errored case may
    # hide a flip as far as the claim can tell: it counts as one on the passing side.
    counted = np.ones(n)
    counted[0] = 0.0
    assert stability_gate(EPSILON, n, np.zeros(n), counted, 1).evidence(
        n, ALPHA, interval=False).decision != "pass"
    assert stability_gate(EPSILON, n, np.zeros(n), np.ones(n), 1).evidence(
        n, ALPHA, interval=False).decision == "pass"


def test_stability_settles_the_full_runs_verdict_exactly() -> None:
    wrong = suite_rate_disagreement(120)
    assert max(wrong.values()) <= ALPHA
    # The grey zone is where the full test is not established: still at most α.
    thresholds = rate_thresholds(120, 1, EPSILON)
    grey = [k for k in wrong if thresholds.pass_to < k < thresholds.fail_from]
    assert len(grey) >= 5


@pytest.mark.parametrize("name", list(model_scenarios()))
def test_model_rate_verdicts_keep_their_error_at_the_limit(name: str) -> None:
    values, gate = model_scenarios()[name]
    false_fail, false_pass = wrong_rates(values, gate)
    assert false_fail <= BOUND
    assert false_pass <= BOUND


def test_the_suite_corrected_bettor_fails_the_model_test() -> None:
    """A regression to the finite-suite correction for the diagnostics is caught."""
    values, gate = model_scenarios()[
        "raw cross share (no placebo), all or nothing, model at the limit"]
    _false_fail, false_pass = wrong_rates(values, RatioGate(gate.limit, "<=", N))
    assert false_pass > 4 * ALPHA


def latency_sizes(population: int) -> dict[str, tuple[int, float, float]]:
    """Per suite (slow cases at the holding count, the tie, the failing count): (count,
    P(FAIL), P(PASS)) over every stopping point, exactly. A FAIL is wrong at the first two,
    a PASS at the last two."""
    holds_upto, fails_from = percentile_counts(population, 95.0)
    fail_side = hypergeometric_decider(population, fails_from - 1, ALPHA)
    pass_side = hypergeometric_decider(population, holds_upto, ALPHA)

    def decide(drawn: int, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fail, _ = fail_side(drawn, ones)
        _, pass_ = pass_side(drawn, ones)
        return fail, pass_ & ~fail

    out = {}
    for name, slow in (("holding", holds_upto), ("tie", holds_upto + 1),
                       ("failing", fails_from)):
        failed, passed = wrong_verdicts(population, slow, decide)
        out[name] = (slow, failed, passed)
    return out


def test_latency_p95_is_exact_at_its_counts_and_tie() -> None:
    found = latency_sizes(1500)
    assert [count for count, _, _ in found.values()] == [74, 75, 76]
    assert found["holding"][1] <= ALPHA and found["tie"][1] <= ALPHA
    assert found["tie"][2] <= ALPHA and found["failing"][2] <= ALPHA


@pytest.mark.parametrize("cases", [1, 2, 20, 21, 40, 59, 200, 1500])
def test_percentile_counts_follow_the_full_runs_percentile(cases: int) -> None:
    holds_upto, fails_from = percentile_counts(cases, 95.0)
    limit = 100.0
    for slow in range(cases + 1):
        values = np.concatenate([np.full(cases - slow, 50.0), np.full(slow, 150.0)])
        p95 = percentiles(values, [95.0])[0]
        assert p95 is not None
        if slow <= holds_upto:
            assert p95 <= limit
        if slow >= fails_from:
            assert p95 > limit
    assert fails_from - holds_upto in (1, 2)


def test_latency_gate_decides_as_the_exact_rule() -> None:
    """`Exceedance` makes the decisions the computation above assumes; an errored case
    counts as slow for a PASS and as fast for a FAIL."""
    rng = np.random.default_rng(2)
    n = 300
    gate = Exceedance(100.0, 95.0, n, np.where(rng.random(n) < 0.01, 150.0, 50.0))
    holds_upto, fails_from = percentile_counts(n, 95.0)
    fail_side = hypergeometric_decider(n, fails_from - 1, ALPHA)
    pass_side = hypergeometric_decider(n, holds_upto, ALPHA)
    for sent in (10, 50, 120, 200, 299):
        slow = int((gate.values[:sent] > 100.0).sum())
        fail, _ = fail_side(sent, np.array([slow]))
        _, pass_ = pass_side(sent, np.array([slow]))
        expected = "fail" if fail[0] else "pass" if pass_[0] else None
        assert gate.evidence(sent, ALPHA, interval=False).decision == expected
    errored = Exceedance(100.0, 95.0, 40, np.full(40, np.nan))
    assert errored.evidence(39, ALPHA, interval=False).decision is None
    assert Exceedance(100.0, 95.0, 40, np.full(40, 150.0)).evidence(
        2, ALPHA, interval=False).decision == "fail"


def blindness_rate(threshold: float, share_counts: list[int], claim: str, seed: int) -> float:
    """The share of seeded orders of a suite with these label counts in which `ModalShare`'s
    rule makes `claim` before the last case: "fail" (blind) when one label's bettor against
    "share < θ" reaches C/α, "pass" (not blind) when every label's bettor against
    "share ≥ θ" reaches 1/α."""
    n, labels = sum(share_counts), len(share_counts)
    suite = np.repeat(np.arange(labels), share_counts)
    order = suite[np.argsort(np.random.default_rng(seed).random((RUNS, n)), axis=1)]
    gate = RatioGate(threshold, "<", n)
    level = math.log((labels if claim == "fail" else 1) / ALPHA)
    made = np.full(RUNS, claim == "pass")
    for label in range(labels):
        x = gate.per_case((order == label).astype(float), np.ones((RUNS, n)), threshold)
        crossed = betting_log_capital(x, gate.zero_point(threshold), claim,  # type: ignore[arg-type]
                                      n)[:, :-1].max(axis=1) >= level
        made = made & crossed if claim == "pass" else made | crossed
    return float(made.mean())


BLIND_SUITES = {
    # 360 of 400 cases on one label: a share of exactly 0.9 is blind (inclusive).
    "at the threshold (blind): wrong not-blind": ([360, 40], "pass"),
    "one case below it: wrong blind": ([359, 41], "fail"),
}


@pytest.mark.parametrize("name", list(BLIND_SUITES))
def test_blindness_keeps_its_error_at_the_threshold(name: str) -> None:
    counts, claim = BLIND_SUITES[name]
    assert blindness_rate(0.9, counts, claim, seed=len(name)) <= BOUND


def test_modal_share_decides_as_the_rule_and_bounds_the_largest_share() -> None:
    n = 400
    rng = np.random.default_rng(5)
    balanced = rng.integers(0, 2, n)
    share = ModalShare(0.9, 2, n, balanced)
    found = share.evidence(100, ALPHA, interval=True)
    assert found.decision == "pass"
    assert found.low is not None and found.high is not None
    full = max(np.mean(balanced == 0), np.mean(balanced == 1))
    assert found.low <= full <= found.high < 0.9
    skewed = np.where(rng.random(n) < 0.99, 0, 1)
    assert ModalShare(0.9, 2, n, skewed).evidence(200, ALPHA, interval=False).decision == "fail"
    uncounted = np.full(n, -1)
    assert ModalShare(0.9, 2, n, uncounted).evidence(100, ALPHA,
                                                     interval=False).decision is None


def f1_suite(rng: np.random.Generator, n: int, labels: int,
             right: float) -> tuple[np.ndarray, np.ndarray, float]:
    truth = rng.integers(0, labels, n)
    wrong = rng.random(n) > right
    predicted = np.where(wrong, (truth + rng.integers(1, labels, n)) % labels, truth)
    f1 = []
    for k in range(labels):
        tp = float(((truth == k) & (predicted == k)).sum())
        f1.append(2 * tp / float((truth == k).sum() + (predicted == k).sum()))
    return truth, predicted, float(np.mean(f1))


def test_macro_f1_bounds_cover_and_close_on_the_suite_value() -> None:
    rng = np.random.default_rng(6)
    n, labels = 300, 3
    truth, predicted, full = f1_suite(rng, n, labels, 0.8)
    gate = MacroF1(0.7, labels, n, truth, predicted)
    last = gate.evidence(n, ALPHA, interval=True)
    assert last.low == pytest.approx(full, abs=1e-6)
    assert last.high == pytest.approx(full, abs=1e-6)
    assert last.decision == "pass"
    missed = 0
    for seed in range(20):
        order = np.random.default_rng(seed).permutation(n)
        shuffled = MacroF1(0.7, labels, n, truth[order], predicted[order])
        for sent in (30, 100, 200):
            found = shuffled.evidence(sent, ALPHA, interval=True)
            assert found.low is not None and found.high is not None
            missed += not found.low <= full <= found.high
    assert missed == 0
    poor = MacroF1(0.9, labels, n, truth, predicted).evidence(150, ALPHA, interval=True)
    assert poor.decision == "fail" and poor.high is not None and poor.high < 0.9


def test_macro_f1_counts_a_label_the_unseen_cases_could_bring() -> None:
    # Two labels seen, a third that only unseen cases could predict or hold.
    truth = np.array([0, 1] * 50)
    gate = MacroF1(0.5, 3, 1000, truth, truth.copy())
    found = gate.evidence(100, ALPHA, interval=True)
    assert found.estimate == 1.0
    assert found.low is not None and found.low <= 2 / 3  # a third label at F1 0
    complete = MacroF1(0.5, 3, 100, truth, truth.copy()).evidence(100, ALPHA, interval=True)
    assert complete.low == pytest.approx(1.0)


if __name__ == "__main__":
    print(f"bound alpha + 3 SE over {RUNS} runs: {BOUND:.4f}")
    for name, (values, gate) in model_scenarios().items():
        ff, fp = wrong_rates(values, gate)
        print(f"{name}: wrong FAIL {ff:.4f}, wrong PASS {fp:.4f}")
    values, gate = model_scenarios()[
        "raw cross share (no placebo), all or nothing, model at the limit"]
    ff, fp = wrong_rates(values, RatioGate(gate.limit, "<=", N))
    print(f"finite-suite bettor on the model at the limit (must fail): wrong FAIL {ff:.4f}, "
          f"wrong PASS {fp:.4f}")
    for name, (count, failed, passed) in latency_sizes(1500).items():
        print(f"latency p95, N=1500, {name} count {count}: FAIL {failed:.4f}, "
              f"PASS {passed:.4f}")
    for name, (counts, claim) in BLIND_SUITES.items():
        print(f"blindness {name}: {blindness_rate(0.9, counts, claim, seed=len(name)):.4f}")
    exact = suite_rate_disagreement(120)
    worst = max(exact, key=exact.__getitem__)
    print(f"stability settled (one pair a case, N=120): status differs at most "
          f"{exact[worst]:.4f} (at {worst} flips); thresholds {rate_thresholds(120, 1, EPSILON)}")
