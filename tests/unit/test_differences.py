"""The test of a mean case difference in [−1, 1] (a persona axis's excess): exact error
rates below the limit with cases at −1, 0 and +1 (both of its parts at work), what the
Bentkus part buys, and its parts against their own definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from decflow.metrics import bentkus
from decflow.metrics.bounded_mean import log_capital, mean_test
from decflow.metrics.differences import difference_cases_needed, difference_test, p_below

LIMIT = 0.05


def exact_fair_rate(n: int, up: float, down: float) -> float:
    """P(the fair side rejects at α) when each case is +1 with probability `up`, −1 with
    `down`, else 0: a sum over the trinomial counts (the test depends on them only)."""
    rate = 0.0
    log_f = [math.lgamma(k + 1) for k in range(n + 1)]
    for ups in range(n + 1):
        for downs in range(n - ups + 1):
            zeros = n - ups - downs
            d = np.r_[np.ones(ups), -np.ones(downs), np.zeros(zeros)]
            if p_below(d, LIMIT) < 0.05:
                rate += math.exp(log_f[n] - log_f[ups] - log_f[downs] - log_f[zeros]
                                 + ups * math.log(up)
                                 + (downs * math.log(down) if downs else 0.0)
                                 + (zeros * math.log1p(-up - down) if zeros else 0.0))
    return rate


@pytest.mark.parametrize(("n", "down"), [(30, 0.0), (63, 0.0), (40, 0.1), (60, 0.3)])
def test_fair_side_keeps_alpha_at_the_limit_exactly(n: int, down: float) -> None:
    # Mean exactly at the limit: up − down = 0.05. With no −1 the Bentkus part decides;
    # with many, only the betting part can.
    if down == 0.0:
        rate = sum(math.comb(n, k) * LIMIT**k * (1 - LIMIT) ** (n - k)
                   for k in range(n + 1)
                   if p_below(np.r_[np.ones(k), np.zeros(n - k)], LIMIT) < 0.05)
    else:
        rate = exact_fair_rate(n, down + LIMIT, down)
    assert rate <= 0.05


def test_p_below_combines_its_parts_by_their_fixed_shares() -> None:
    d = np.r_[np.ones(3), -np.ones(5), np.zeros(150), np.full(10, 0.25)]
    betting = math.exp(-log_capital(d, LIMIT, support=(-1.0, 1.0), above=False))
    positive = bentkus.p_below(float(np.maximum(d, 0.0).sum()), d.size, LIMIT)
    assert p_below(d, LIMIT) == pytest.approx(min(1.0, betting / 0.2, positive / 0.8))
    test = difference_test(d, LIMIT)
    assert test.p_below == p_below(d, LIMIT)
    assert test.p_above == mean_test(d, LIMIT, support=(-1.0, 1.0)).p_above
    assert test.high == pytest.approx(min(
        mean_test(d, LIMIT, support=(-1.0, 1.0), alpha=0.01).high,  # type: ignore[type-var]
        bentkus.upper_bound(float(np.maximum(d, 0.0).sum()), d.size, 0.04)))


def test_an_odd_excess_case_no_longer_blocks_a_fair_verdict() -> None:
    # 200 cases, 3 with every cross pair flipped and no placebo flip (1.5 % against 5 %):
    # betting alone never shows it fair (one such case blocks it at any n up to ~200).
    d = np.r_[np.ones(3), np.zeros(197)]
    assert mean_test(d, LIMIT, support=(-1.0, 1.0)).p_below > 0.05
    assert difference_test(d, LIMIT).p_below < 0.05


def test_quiet_cases_and_the_unfair_side() -> None:
    assert difference_test(np.zeros(63), LIMIT).p_below < 0.05
    assert difference_test(np.zeros(62), LIMIT).p_below >= 0.05
    assert difference_cases_needed(np.zeros(10), LIMIT, alpha=0.05) == 63
    # Above the limit the betting test alone decides, at the level asked for.
    d = np.r_[np.ones(12), np.zeros(8)]
    assert difference_cases_needed(d, LIMIT, alpha=0.0125) == mean_test(
        d, LIMIT, support=(-1.0, 1.0), alpha=0.0125).cases_needed


def test_a_noisy_model_is_sized_by_the_betting_part_alone() -> None:
    # Cross and placebo shares both move: the mean excess is 0, its positive parts 0.25 —
    # above the limit, so only betting on the differences can show it fair.
    d = np.tile([0.5, -0.5, 0.0, 0.0], 25)
    betting = mean_test(d, LIMIT, support=(-1.0, 1.0), alpha=0.01).cases_needed
    assert difference_test(d, LIMIT).cases_needed == betting
    assert difference_cases_needed(d, LIMIT, alpha=0.05) == betting
