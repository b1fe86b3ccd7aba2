"""The `--plan` power curve: at the cases it names, the real tests show the rate failing in
about 80 % of seeded all-or-nothing suites (and at a tenth fewer cases, less often)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from decflow.metrics import bentkus, rounded_shares
from decflow.metrics.binomial import upper_tail
from decflow.metrics.bounded_mean import binomial_test, log_capital
from decflow.metrics.case_rates import rate_test
from decflow.metrics.differences import difference_test
from decflow.metrics.power import cases_for_power, power_curve

SUITES = 400


def p_above(test: str, values: np.ndarray, limit: float) -> float:
    """The p-value of "rate ≤ limit" that the full run's test computes for these values."""
    if test == "binomial":
        return upper_tail(int(values.sum()), values.size, limit)  # binomial_test's
    if test == "rounded":  # rate_test's: all-or-nothing shares round to themselves
        return rounded_shares.p_above(int(values.sum()), values.size, limit)
    if test == "bentkus":  # rate_test's without a rounding seed (the call cache on)
        return bentkus.p_above(float(values.sum()), values.size, limit)
    # difference_test's unfair side: the betting mixture's 1/K at the limit.
    return math.exp(-log_capital(values, limit, support=(-1.0, 1.0)))


def fail_share(test: str, n: int, rate: float, limit: float, alpha: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    failed = sum(p_above(test, (rng.random(n) < rate).astype(float), limit) < alpha
                 for _ in range(SUITES))
    return failed / SUITES


def test_the_p_values_are_the_full_runs() -> None:
    values = np.r_[np.ones(9), np.zeros(41)]
    assert p_above("binomial", values, 0.05) == binomial_test(9, 50, 0.05).p_above
    assert p_above("rounded", values, 0.05) == rate_test(
        values, 3, 0.05, uniforms=np.full(values.size, 0.5)).p_above
    assert p_above("bentkus", values, 0.05) == rate_test(values, 3, 0.05).p_above
    assert p_above("difference", values, 0.05) == pytest.approx(
        difference_test(values, 0.05).p_above)


@pytest.mark.parametrize(("test", "limit", "effect", "alpha"), [
    ("binomial", 0.05, 2, 0.05), ("rounded", 0.05, 1, 0.05), ("bentkus", 0.1, 1, 0.05),
    ("difference", 0.05, 4, 0.0125)])
def test_the_named_cases_have_about_eighty_percent_power(test: str, limit: float, effect: int,
                                                         alpha: float) -> None:
    n = cases_for_power(test, limit, effect, alpha=alpha)  # type: ignore[arg-type]
    assert n is not None
    rate = (1 + effect) * limit
    # ± 2.5 binomial standard errors of 400 suites around 0.8 (discrete tests saw-tooth).
    assert fail_share(test, n, rate, limit, alpha, seed=n) >= 0.75
    assert fail_share(test, int(0.8 * n), rate, limit, alpha, seed=n + 1) < 0.8


def test_the_curve_falls_with_the_effect_and_grows_with_holm() -> None:
    curve = [point["cases"] for point in power_curve("rounded", 0.05)]
    assert curve == sorted(curve, reverse=True)  # type: ignore[type-var]
    one, four = (power_curve("difference", 0.05, alpha=a)[0]["cases"] for a in (0.05, 0.0125))
    assert one is not None and four is not None and four > one
    assert cases_for_power("binomial", 0.5, 1) is None  # a rate of 1 cannot be beaten
