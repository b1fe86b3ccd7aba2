"""The inference core: exact binomial tails, Clopper–Pearson bounds, the betting mixture,
evidence records and Holm families — against independent computations (integer sums,
closed forms) and exact error rates on lattice data."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from decflow.metrics.binomial import (
    clopper_pearson_high,
    clopper_pearson_low,
    lower_tail,
    regularized_beta,
    upper_tail,
)
from decflow.metrics.bounded_mean import WEIGHTS, binomial_test, log_capital, mean_test
from decflow.metrics.evidence import Evidence, count_evidence, holm_verdicts, verdict_from_p


def exact_upper_tail(k: int, n: int, p: Fraction) -> float:
    return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


@pytest.mark.parametrize(("k", "n", "p"), [(0, 5, "1/3"), (3, 10, "1/4"), (7, 12, "2/3"),
                                           (20, 40, "1/2"), (1, 200, "1/100"), (150, 200, "7/10")])
def test_binomial_tails_equal_integer_sums(k: int, n: int, p: str) -> None:
    exact = exact_upper_tail(k, n, Fraction(p))
    assert upper_tail(k, n, float(Fraction(p))) == pytest.approx(exact, rel=1e-10, abs=1e-15)
    below = 1.0 - exact_upper_tail(k + 1, n, Fraction(p))
    assert lower_tail(k, n, float(Fraction(p))) == pytest.approx(below, rel=1e-10, abs=1e-15)


def test_regularized_beta_closed_forms() -> None:
    assert regularized_beta(1.0, 1.0, 0.3) == pytest.approx(0.3, abs=1e-14)
    assert regularized_beta(2.0, 1.0, 0.3) == pytest.approx(0.09, abs=1e-14)  # x^a
    assert regularized_beta(1.0, 3.0, 0.3) == pytest.approx(1 - 0.7**3, abs=1e-14)
    with pytest.raises(ValueError):
        regularized_beta(0.0, 1.0, 0.5)


@pytest.mark.parametrize("n", [1, 4, 10, 59, 73, 1000, 10_000_000])
def test_zero_of_n_upper_bound_is_the_closed_form(n: int) -> None:
    assert clopper_pearson_high(0, n, 0.05) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12)
    assert clopper_pearson_low(0, n, 0.05) == 0.0


@pytest.mark.parametrize(("k", "n"), [(1, 13), (8, 78), (3, 7), (50, 1000)])
def test_clopper_pearson_bounds_are_where_the_tails_equal_alpha(k: int, n: int) -> None:
    low, high = clopper_pearson_low(k, n, 0.05), clopper_pearson_high(k, n, 0.05)
    assert upper_tail(k, n, low) == pytest.approx(0.05, abs=1e-9)
    assert lower_tail(k, n, high) == pytest.approx(0.05, abs=1e-9)
    assert low < k / n < high


def test_binomial_test_bounds_agree_with_p_values_and_sizes() -> None:
    quiet = binomial_test(0, 73, 0.05)
    assert quiet.high < 0.05 and quiet.p_below < 0.05 and quiet.verdict() == "holds"
    assert quiet.cases_needed == 59  # ln 0.05 / ln 0.95 = 58.4
    assert binomial_test(0, 58, 0.05).verdict() == "not_established"
    flips = binomial_test(8, 78, 0.05)
    assert flips.low > 0.05 and flips.p_above < 0.05 and flips.verdict() == "fails"
    assert flips.verdict(">=") == "holds"
    assert binomial_test(0, 0, 0.05).verdict() == "not_established"
    with pytest.raises(ValueError):
        binomial_test(0, 10, 0.0)


def test_binomial_detectable_effect_has_eighty_percent_power() -> None:
    test = binomial_test(2, 100, 0.05)  # below the limit: how far below does PASS get 80 %?
    assert test.detectable is not None
    p = 0.05 - test.detectable
    critical = max(k for k in range(101) if lower_tail(k, 100, 0.05) < 0.05)
    assert lower_tail(critical, 100, p) == pytest.approx(0.80, abs=1e-6)


@pytest.mark.parametrize(
    ("count", "n", "limit"),
    [(0, 3, 0.5), (3, 3, 0.5), (1, 40, 0.01), (39, 40, 0.99), (7, 60, 0.2), (50, 60, 0.7),
     (400, 1000, 0.45), (600, 1000, 0.45)],
)
def test_binomial_detectable_effect_uses_the_critical_count_of_every_count_scanned(
    count: int, n: int, limit: float
) -> None:
    # The critical counts are found by bisection; a scan of every count is the definition.
    test = binomial_test(count, n, limit)
    if count / n >= limit:
        rejecting = [k for k in range(n + 1) if upper_tail(k, n, limit) < 0.05]
        if not rejecting:
            assert test.detectable is None
            return
        assert test.detectable is not None
        power = upper_tail(rejecting[0], n, limit + test.detectable)
    else:
        rejecting = [k for k in range(n + 1) if lower_tail(k, n, limit) < 0.05]
        if not rejecting:
            assert test.detectable is None
            return
        assert test.detectable is not None
        power = lower_tail(rejecting[-1], n, limit - test.detectable)
    assert power == pytest.approx(0.80, abs=1e-6)


def test_betting_bounds_contain_the_mean_and_match_the_p_values() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.beta(0.5, 2.0, size=int(rng.integers(2, 80)))
        limit = float(rng.uniform(0.05, 0.6))
        test = mean_test(x, limit)
        assert test.low <= x.mean() <= test.high  # type: ignore[operator]
        assert (test.p_above < 0.05) == (test.low > limit)  # type: ignore[operator]
        assert (test.p_below < 0.05) == (test.high < limit)  # type: ignore[operator]
        assert test.low >= 0.0 and test.high <= 1.0  # type: ignore[operator]


def test_betting_is_the_mixture_of_constant_bets() -> None:
    x = [0.0, 0.25, 1.0, 0.5]
    m = 0.3
    lam = 2.0 ** -np.arange(12) / m
    direct = sum(w * np.prod(1 + b * (np.array(x) - m)) for w, b in zip(WEIGHTS, lam, strict=True))
    assert log_capital(x, m) == pytest.approx(math.log(direct), rel=1e-12)
    assert log_capital(x[::-1], m) == log_capital(x, m)  # the order of cases does not matter


def test_betting_quiet_cases_certify_near_the_exact_bound() -> None:
    assert mean_test(np.zeros(66), 0.05).verdict() == "holds"
    assert mean_test(np.zeros(60), 0.05).verdict() == "not_established"
    assert mean_test(np.zeros(30), 0.05).cases_needed == 66
    nine = mean_test(np.ones(9), 0.05, support=(-1.0, 1.0))
    assert nine.verdict() == "fails" and nine.p_above < 0.0125  # also after Holm over 4


def exact_two_point_rejection(n: int, a: float, b: float, limit: float, above: bool) -> float:
    """P(the betting test rejects at the limit) for n iid values ∈ {a, b} with mean = limit,
    summed exactly over the count of b's (the test depends on the counts only)."""
    q = (limit - a) / (b - a)
    support = (-1.0, 1.0)
    total = 0.0
    for k in range(n + 1):
        x = np.array([a] * (n - k) + [b] * k)
        if log_capital(x, limit, support=support, above=above) > math.log(20):
            total += math.comb(n, k) * q**k * (1 - q) ** (n - k)
    return total


@pytest.mark.parametrize("n", [1, 5, 20, 54, 100])
def test_betting_error_at_the_limit_is_at_most_alpha_exactly(n: int) -> None:
    for a, b in ((0.0, 1.0), (-1.0, 1.0), (-0.25, 0.5)):
        assert exact_two_point_rejection(n, a, b, 0.05, above=True) <= 0.05
        assert exact_two_point_rejection(n, a, b, 0.05, above=False) <= 0.05


def test_mean_test_refuses_values_outside_the_support() -> None:
    with pytest.raises(ValueError):
        mean_test([0.5, 1.5], 0.2)
    with pytest.raises(ValueError):
        mean_test([0.5], 1.0)
    assert mean_test([], 0.2).verdict() == "not_established"


def test_verdicts_by_direction_and_holm_on_each_side() -> None:
    assert verdict_from_p("<=", 0.01, 1.0) == "fails"
    assert verdict_from_p(">=", 0.01, 1.0) == "holds"
    assert verdict_from_p("<=", 1.0, 0.01) == "holds"
    assert verdict_from_p("<=", 0.2, 0.2) == "not_established"
    tests = [binomial_test(0, 80, 0.05), binomial_test(0, 62, 0.05), None,
             binomial_test(0, 62, 0.05)]
    # Unadjusted all hold (p 0.0165, 0.0415, 0.0415); Holm over three keeps only the first
    # (0.0165 · 3 < 0.05, then 0.0415 · 2 > 0.05).
    assert [t.verdict() for t in tests if t] == ["holds"] * 3
    assert holm_verdicts(tests) == ["holds", "not_established", None, "not_established"]


def test_evidence_records() -> None:
    zero = count_evidence(0, 10)
    assert zero.verdict == "holds" and zero.high == pytest.approx(1 - 0.05 ** 0.1)
    assert count_evidence(1, 10).verdict == "fails"
    assert count_evidence(0, 0).verdict == "not_established"
    record = binomial_test(0, 10, 0.05).evidence(notes=("underpowered",))
    assert isinstance(record, Evidence)
    data = record.to_dict()
    assert data["verdict"] == "not_established" and data["notes"] == ["underpowered"]
    assert "low" in data and data["cases_needed"] == 59
    assert "cases_needed" not in count_evidence(0, 10).to_dict()


def test_case_rates_count_each_case_once() -> None:
    from decflow.metrics.case_rates import case_shares, rate_test, shares_by_case

    codes = np.array([0, 0, 0, 2, 2, 3])
    hits = np.array([True, True, False, False, False, True])
    shares, most = shares_by_case(codes, hits)
    assert shares.tolist() == pytest.approx([2 / 3, 0.0, 1.0]) and most == 3
    assert np.isnan(case_shares(codes, hits, 4)[1])
    # One observation per case: the exact binomial test; several: betting on the shares.
    assert rate_test(np.array([0.0, 1.0, 0.0]), 1, 0.2).method.startswith("exact binomial")
    assert rate_test(shares, most, 0.2).method.startswith("Bentkus")
