"""The persona verdicts keep their stated error rates at every number of cases.

Exact computations where the procedure allows them, seeded simulations otherwise (α = 0.05,
limit 0.05; a simulated share of 400 verdicts may exceed α by the one-sided binomial 99 %
tolerance, 0.075 in all):

- nine cases with every cross pair flipped and no placebo flip: UNFAIR, exit 1; nine cases
  of which four flip every cross pair cannot be unfair after Holm over four axes by any
  test symmetric in the cases (a null distribution gives the sample 0.0252 > α/4);
- the exact worst-case FAIR rate at the limit (each case's excess all-or-nothing: 1 with
  probability 0.05, else 0) is at most α for every n from 1 to 200; the run's claim "every
  axis fair" (an intersection–union test, each axis at α) is wrong only when an axis at
  the limit was called fair, so the same bound holds for it: four axes, one at the limit and
  three quiet, through the analysis;
- a placebo more disruptive than the cross swap (placebo flips concentrated in whole cases,
  cross flips spread over pairs; the excess exactly at the limit): FAIR ≤ α;
- no group effect (cross and placebo swaps exchangeable, case-level flip rates varying):
  UNFAIR ≤ α, a stated direction ≤ α;
- a planted excess of 0.25 (8 pairs per case, three other axes without effect): found in
  ≥ 80 % at 40 cases. At 20 cases no test that is valid for every distribution of the case
  excesses in [−1, 1] can reach 80 % after Holm over four axes (see the last test); the
  t-test that did (93 %) was not valid (6.27 % wrong FAIR at n = 54).

The tables are what the pipeline hands the analysis (the pair table with ``prob_a``/``prob_b``
attached), built with numpy. The no-group-effect scenario on the real pair builder (100
catalogue seeds) is in ``bench/persona_null.py`` (about 100 s). Run this module as a script
(``python -m tests.unit.test_counterfactual_simulation``) to print the figures recorded in
docs/statistics.md.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from decflow.diagnostics.counterfactual import (
    FAIR,
    UNFAIR,
    CounterfactualResult,
    analyse_counterfactual,
    counterfactual_checks,
)
from decflow.gates import status_of
from decflow.metrics.differences import p_below

ALPHA = 0.05
LIMIT = 0.05
LABELS = ["approve", "review", "deny"]
AXES = ["gender", "ethnicity", "religion", "role"]
APPROVE = [0.8, 0.15, 0.05]
DENY = [0.1, 0.2, 0.7]
RUNS = 100  # × 4 axes = 400 axis verdicts
TOLERANCE = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / 400)  # 0.0753


def pair_table(cross: np.ndarray, placebo: np.ndarray, swap: np.ndarray) -> pl.DataFrame:
    """Flip indicators shaped (axes, cases, pairs) as the analysis's pair table: a flip is
    arm A approved, arm B denied; ``swap`` puts the group-y arm first."""
    axis, case, k = (a.ravel() for a in np.indices(cross.shape))
    names = np.array(AXES[: cross.shape[0]])[axis]
    pair_id = [f"{a}/c{c}/{p}" for a, c, p in zip(names, case, k, strict=True)]
    groups = np.where(swap.ravel(), "y", "x")
    others = np.where(swap.ravel(), "x", "y")

    def kind(flags: np.ndarray, label: str, group_b: np.ndarray) -> pl.DataFrame:
        prob_b = np.where(flags.ravel()[:, None], DENY, APPROVE)
        return pl.DataFrame({
            "axis": names, "pair_id": pair_id, "case_id": [f"c{c}" for c in case],
            "kind": label, "group_a": groups, "group_b": group_b, "status": "ok",
            "prob_a": np.tile(APPROVE, (names.size, 1)), "prob_b": prob_b,
        }).with_columns(pl.col("prob_a", "prob_b").cast(pl.List(pl.Float64)))

    return pl.concat([kind(cross, "cross", others), kind(placebo, "placebo", groups)])


def simulate(rng: np.random.Generator, *, cases: int, pairs: int, cross_rate: np.ndarray,
             placebo_rate: np.ndarray, direction: bool = False) -> CounterfactualResult:
    """Per axis and case the pairs flip independently at the given (axes, cases) rates;
    ``direction`` also runs the direction test (favourable label: approve)."""
    shape = (len(AXES), cases, pairs)
    cross = rng.random(shape) < cross_rate[:, :, None]
    placebo = rng.random(shape) < placebo_rate[:, :, None]
    table = pair_table(cross, placebo, rng.random(shape) < 0.5)
    return analyse_counterfactual(table, LABELS, axes=AXES, max_flip_rate=LIMIT,
                                  favourable_labels=["approve"] if direction else None)


def no_group_effect(rng: np.random.Generator) -> CounterfactualResult:
    # Case-level flip rates vary (some cases sit near the decision boundary), and cross and
    # placebo swaps share them: exchangeable, no group effect.
    rate = rng.beta(0.5, 2.0, size=(len(AXES), 20))
    return simulate(rng, cases=20, pairs=8, cross_rate=rate, placebo_rate=rate, direction=True)


def disruptive_placebo(rng: np.random.Generator) -> CounterfactualResult:
    # The placebo changes more of the text than the cross swap: it flips every pair of 30 %
    # of the cases; the cross swap flips 35 % of pairs everywhere. Excess 0.35 − 0.30 = 0.05.
    placebo = np.where(rng.random((len(AXES), 20)) < 0.30, 1.0, 0.0)
    cross = np.full((len(AXES), 20), 0.35)
    return simulate(rng, cases=20, pairs=8, cross_rate=cross, placebo_rate=placebo)


def planted(rng: np.random.Generator, cases: int) -> CounterfactualResult:
    cross = np.full((len(AXES), cases), 0.2)
    cross[AXES.index("religion")] += 0.25
    return simulate(rng, cases=cases, pairs=8, cross_rate=cross,
                    placebo_rate=np.full((len(AXES), cases), 0.2))


def shares(results: list[CounterfactualResult], axes: list[str]) -> dict[str, float]:
    verdicts = [r.axes[a] for r in results for a in axes]
    return {
        "verdicts": len(verdicts),
        "unfair": sum(v.verdict == UNFAIR for v in verdicts) / len(verdicts),
        "fair": sum(v.verdict == FAIR for v in verdicts) / len(verdicts),
        "direction": sum(v.direction is not None and v.direction.significant
                         for v in verdicts) / len(verdicts),
    }


def runs(scenario: object, seed: int, count: int = RUNS, **options: int) -> list[
    CounterfactualResult
]:
    rng = np.random.default_rng(seed)
    return [scenario(rng, **options) for _ in range(count)]  # type: ignore[operator]


def fair_count(n: int, level: float) -> int:
    """The most all-or-nothing cases (excess 1, the rest 0) among n with which the fair
    side's test still rejects at ``level`` (−1: not even none). Its p-value rises with every
    one, so FAIR ⟺ count ≤ this."""
    k = -1
    while k < n and p_below(np.r_[np.ones(k + 1), np.zeros(n - k - 1)], LIMIT) < level:
        k += 1
    return k


def exact_fair_rate(n: int, level: float) -> float:
    """P(the fair side's test rejects at ``level``) when each of n case excesses is 1 with
    probability LIMIT and 0 otherwise: the binomial CDF at ``fair_count``."""
    k_star = fair_count(n, level)
    return sum(math.comb(n, k) * LIMIT**k * (1 - LIMIT) ** (n - k) for k in range(k_star + 1))


def test_nine_cases_with_every_cross_pair_flipped_are_unfair_and_exit_1() -> None:
    cross = np.zeros((len(AXES), 9, 4), dtype=bool)
    cross[0] = True  # a server that denies every woman: every gender cross pair flips
    table = pair_table(cross, np.zeros_like(cross), np.zeros_like(cross))
    result = analyse_counterfactual(table, LABELS, axes=AXES, max_flip_rate=LIMIT)
    assert result.axes["gender"].verdict == UNFAIR
    assert status_of(counterfactual_checks(result, "requirement")) == ("fail", 1)


def test_four_of_nine_cases_flipping_cannot_be_unfair_after_holm_over_four_axes() -> None:
    # A server that denies every woman, where 4 of 9 cases' men are not denied: d = 1 in
    # four cases, 0 in five (issue 32). The null P(d = 1) = a, P(d = −1) = a − 0.05,
    # P(d = 0) = 1.05 − 2a has mean 0.05 and gives this sample's counts probability
    # 126·a⁴(1.05 − 2a)⁵, largest at a = 4.2/18: above Holm's first level α/4, so no test
    # symmetric in the cases can call the sample unfair there.
    a = 4.2 / 18
    worst = math.comb(9, 4) * a**4 * (1.05 - 2 * a) ** 5
    grid = max(math.comb(9, 4) * x**4 * (1.05 - 2 * x) ** 5
               for x in np.linspace(0.05, 0.525, 20_001))
    assert worst == pytest.approx(grid, rel=1e-6)
    assert ALPHA / 4 < round(worst, 4) == 0.0252 < ALPHA
    cross = np.zeros((len(AXES), 9, 4), dtype=bool)
    cross[0, :4] = True
    table = pair_table(cross, np.zeros_like(cross), np.zeros_like(cross))
    gender = analyse_counterfactual(table, LABELS, axes=AXES, max_flip_rate=LIMIT).axes["gender"]
    assert gender.test.estimate == pytest.approx(4 / 9)
    assert gender.verdict != UNFAIR and gender.test.p_above > ALPHA


def test_exact_worst_case_fair_rate_at_the_limit_is_at_most_alpha_for_every_n() -> None:
    for n in range(1, 201):
        single = exact_fair_rate(n, ALPHA)
        assert single <= ALPHA, (n, single)


def test_every_axis_fair_is_an_intersection_union_test_at_alpha() -> None:
    # Four axes: three quiet, gender with k all-or-nothing cases. The run's claim "every axis
    # fair" holds exactly when gender is fair at α itself (no Holm), so its error with gender
    # at the limit is the single-axis rate above, ≤ α at every n.
    for n in (63, 200):
        k = fair_count(n, ALPHA)
        assert k > fair_count(n, ALPHA / 4)  # Holm's α/4 would allow fewer ones
        for ones, every_axis_fair in ((k, True), (k + 1, False)):
            cross = np.zeros((len(AXES), n, 1), dtype=bool)
            cross[0, :ones] = True
            table = pair_table(cross, np.zeros_like(cross), np.zeros_like(cross))
            result = analyse_counterfactual(table, LABELS, axes=AXES, max_flip_rate=LIMIT)
            verdicts = [result.axes[a].verdict for a in AXES]
            assert verdicts[1:] == [FAIR] * 3
            assert (verdicts == [FAIR] * 4) is every_axis_fair
            assert status_of(counterfactual_checks(result, "requirement"))[0] == (
                "pass" if every_axis_fair else "warn")


def test_a_placebo_more_disruptive_than_the_cross_swap_is_not_called_fair() -> None:
    got = shares(runs(disruptive_placebo, 21), AXES)
    assert got["verdicts"] == 400 and got["fair"] <= TOLERANCE


def test_no_group_effect_is_called_unfair_at_most_alpha() -> None:
    got = shares(runs(no_group_effect, 22), AXES)
    assert got["unfair"] <= TOLERANCE
    assert got["direction"] <= TOLERANCE  # a stated direction is a claim too


def test_planted_excess_of_a_quarter_is_found_at_forty_cases() -> None:
    results = runs(planted, 23, cases=40)
    assert shares(results, ["religion"])["unfair"] >= 0.80
    # The three axes without an effect are rarely blamed alongside it.
    assert shares(results, ["gender", "ethnicity", "role"])["unfair"] <= TOLERANCE


def test_no_valid_test_finds_the_planted_excess_in_most_runs_at_twenty_cases() -> None:
    # Planted: cross pairs flip at 0.45, placebo at 0.20, 8 each: a case excess d has mean
    # 0.25. Mix it with a point at d = −1 (every placebo pair flipped, no cross pair) of
    # weight q: the mean is 0.05 when (1 − q)·0.25 − q = 0.05. That mixture is in the null,
    # and with probability (1 − q)^20 its 20 cases show no −1 and look exactly like planted
    # data. A test of level α/4 (Holm's first step) rejects the mixture with probability
    # ≥ (1 − q)^20 · power, so its power is at most (α/4) / (1 − q)^20.
    q = (0.25 - LIMIT) / 1.25
    bound = (ALPHA / 4) / (1 - q) ** 20
    assert bound < 0.80
    assert round(bound, 2) == 0.41


def measure() -> dict[str, object]:
    worst = max((exact_fair_rate(n, ALPHA), n) for n in range(1, 201))
    return {
        "worst-case FAIR at the limit, one axis and every axis fair (rate, n)": worst,
        "placebo more disruptive": shares(runs(disruptive_placebo, 21), AXES),
        "no group effect": shares(runs(no_group_effect, 22), AXES),
        "planted 0.25, 40 cases": shares(runs(planted, 23, cases=40), ["religion"]),
        "planted 0.25, 20 cases": shares(runs(planted, 24, cases=20), ["religion"]),
    }


if __name__ == "__main__":
    for name, got in measure().items():
        print(f"{name}: {got}")
