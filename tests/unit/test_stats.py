"""Statistics against the hand-computed numbers in reference/stability-and-decision-flip.md."""

from __future__ import annotations

import pytest

from decflow.metrics.stats import classify, holm, mcnemar_exact, pairs_needed, sign_test, wilson


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        (0, 4, 0.000, 0.490),
        (0, 8, 0.000, 0.324),
        (0, 13, 0.000, 0.228),
        (1, 13, 0.014, 0.333),
        (0, 36, 0.000, 0.096),
        (8, 78, 0.053, 0.190),
        (0, 33, 0.000, 0.104),
        (0, 76, 0.000, 0.048),
        (8, 12, 0.391, 0.862),
        (0, 12, 0.000, 0.243),
        (0, 11, 0.000, 0.259),
    ],
)
def test_wilson_matches_reference_table(k: int, n: int, lo: float, hi: float) -> None:
    got_lo, got_hi = wilson(k, n)
    assert got_lo == pytest.approx(lo, abs=5e-4)
    assert got_hi == pytest.approx(hi, abs=5e-4)


def test_wilson_73_quiet_pairs_certify_five_percent() -> None:
    lo, hi = wilson(0, 73)
    assert lo == 0.0
    assert 0.0499 <= hi < 0.05  # the reference quotes 0.0499 (truncated)
    assert wilson(0, 72)[1] > 0.05


def test_wilson_zero_trials_is_vacuous_and_undecided() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    for eps in (0.01, 0.05, 0.5, 0.99):
        assert classify(*wilson(0, 0), eps) == "undecided"


def test_wilson_rejects_impossible_counts() -> None:
    for k, n in [(-1, 3), (4, 3), (0, -1)]:
        with pytest.raises(ValueError):
            wilson(k, n)


def test_classify_examples_from_reference() -> None:
    assert classify(*wilson(1, 13), 0.05) == "undecided"  # 7.7 % but the interval straddles
    assert classify(*wilson(8, 78), 0.05) == "stochastic"
    assert classify(*wilson(0, 76), 0.05) == "deterministic"
    assert classify(*wilson(0, 8), 0.01) == "undecided"
    assert classify(*wilson(8, 12), 0.01) == "stochastic"


def test_classify_is_strict_at_epsilon() -> None:
    assert classify(0.05, 0.2, 0.05) == "undecided"
    assert classify(0.0, 0.05, 0.05) == "undecided"
    assert classify(0.0500001, 0.2, 0.05) == "stochastic"
    assert classify(0.0, 0.0499999, 0.05) == "deterministic"


@pytest.mark.parametrize(("eps", "n"), [(0.10, 35), (0.05, 73), (0.01, 381)])
def test_pairs_needed_presets(eps: float, n: int) -> None:
    assert pairs_needed(eps) == n
    # The sized count certifies and one fewer does not.
    assert wilson(0, n)[1] < eps
    assert wilson(0, n - 1)[1] >= eps


def test_pairs_needed_with_observed_rate() -> None:
    assert pairs_needed(0.05, 0.05) is None
    assert pairs_needed(0.05, 0.2) is None
    n = pairs_needed(0.10, 0.02)
    assert n is not None
    assert n > pairs_needed(0.10)  # type: ignore[operator]
    with pytest.raises(ValueError):
        pairs_needed(0.0)
    with pytest.raises(ValueError):
        pairs_needed(1.0)


def test_exact_tests_reference_values() -> None:
    assert sign_test(6, 0) == pytest.approx(0.03125)
    assert sign_test(6, 1) == pytest.approx(0.125)
    assert sign_test(8, 0) == pytest.approx(0.0078125)
    assert sign_test(8, 0) < 0.05 / 4  # survives Holm's first step over four axes
    assert sign_test(5, 0) == pytest.approx(0.0625)
    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == 1.0
    assert sign_test(0, 6) == sign_test(6, 0)
    assert mcnemar_exact(10, 1) == pytest.approx(2 * 12 / 2**11)
    assert mcnemar_exact(1, 1) == 1.0


def test_holm_adjustment() -> None:
    assert holm([]) == []
    assert holm([0.0078125, 0.5, 1.0, 0.2]) == pytest.approx([0.03125, 1.0, 1.0, 0.6])
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.04]) == [0.04]
    # Adjusted values follow the raw order and are capped at 1.
    assert holm([0.3, 0.9, 0.5]) == pytest.approx([0.9, 1.0, 1.0])


# -- Student t and the clustered excess -------------------------------------------------------


def t_density_tail(t: float, df: int, steps: int = 20000, upper: float = 400.0) -> float:
    """P(T > t) by Simpson integration of the t density: an oracle independent of the series."""
    import math

    const = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))

    def density(x: float) -> float:
        return const * (1 + x * x / df) ** (-(df + 1) / 2)

    h = (upper - t) / steps
    total = density(t) + density(upper)
    total += sum((4 if i % 2 else 2) * density(t + i * h) for i in range(1, steps))
    return total * h / 3


@pytest.mark.parametrize(("t", "df"), [(0.5, 4), (2.0, 6), (1.7, 5), (2.683282, 9), (-1.0, 19),
                                        (3.1, 29), (2.2, 60)])
def test_student_t_tail_matches_numerical_integration(t: float, df: int) -> None:
    from decflow.metrics.stats import student_t_sf

    expected = t_density_tail(t, df) if t >= 0 else 1 - t_density_tail(-t, df)
    assert student_t_sf(t, df) == pytest.approx(expected, abs=2e-6)


@pytest.mark.parametrize(
    ("q", "df", "value"),
    # Printed t tables (one-sided 95 % / 97.5 %).
    [(0.95, 1, 6.313752), (0.95, 9, 1.833113), (0.95, 19, 1.729133), (0.95, 29, 1.699127),
     (0.975, 2, 4.302653), (0.975, 10, 2.228139), (0.05, 9, -1.833113)],
)
def test_student_t_quantile_matches_tables(q: float, df: int, value: float) -> None:
    from decflow.metrics.stats import student_t_quantile

    assert student_t_quantile(q, df) == pytest.approx(value, abs=1e-6)


def test_student_t_closed_forms() -> None:
    from decflow.metrics.stats import student_t_sf

    assert student_t_sf(1.0, 1) == pytest.approx(0.25)  # Cauchy: 1/2 − atan(1)/π
    assert student_t_sf(1.0, 2) == pytest.approx((1 - 1 / 3**0.5) / 2)  # t/√(2 + t²)
    assert student_t_sf(0.0, 7) == pytest.approx(0.5)


def test_excess_with_no_flip_is_bounded_by_the_all_or_nothing_floor() -> None:
    from decflow.metrics.excess import cases_to_decide, excess_test

    # 30 quiet cases: sd 0, se floor √(0.05·0.95/30) = 0.039791; upper bound adds the floor
    # to s² = 0, so the same: 1.699127·0.039791 = 0.067610 > 0.05 → not yet fair.
    quiet = excess_test([0.0] * 30, 0.05)
    assert (quiet.excess, quiet.sd) == (0.0, 0.0)
    assert quiet.se == pytest.approx(0.0397911, abs=1e-7)
    assert quiet.ci_high == pytest.approx(0.0676102, abs=1e-6)
    # n = 54: 1.674116·√(0.0475/54) = 0.049652 < 0.05; n = 53: 1.674689·√(0.0475/53) = 0.05013.
    assert cases_to_decide(quiet) == 54
    assert excess_test([0.0] * 54, 0.05).ci_high < 0.05 < excess_test([0.0] * 53, 0.05).ci_high


def test_excess_with_too_few_cases_gives_no_test() -> None:
    from decflow.metrics.excess import excess_test

    one = excess_test([0.5], 0.05)
    assert (one.cases, one.excess, one.p_value, one.enough_cases) == (1, 0.5, None, False)
    nine = excess_test([0.5] * 9, 0.05)
    assert nine.p_value is not None and not nine.enough_cases
    with pytest.raises(ValueError, match="limit"):
        excess_test([0.0], 0.0)
