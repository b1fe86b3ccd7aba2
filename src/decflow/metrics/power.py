"""Planning: the cases a case-level test needs to decide with 80 % power, for a `--plan`'s
power curve.

An effect is a distance from the limit in units of the limit: effect k means a true rate of
(1 + k)·limit, which the test should show failing. Each case's value is taken all or
nothing (1 with the true rate, else 0: every pair or variant of a case flips together), the
clustering a case-level test is built for and the one that needs the most cases of the
spreads a rate can have; the power at n cases is then an exact binomial tail at the test's
critical count. The power of a discrete test is not monotone in n (it saw-tooths), so the
figure is the first n found by doubling and bisection at which it reaches 80 % — a
planning figure, like every *cases needed*.

Tests: the exact binomial (one observation per case), the exact binomial on randomly
rounded shares (`metrics.rounded_shares`: on all-or-nothing shares the exact test but for
its Markov step beside the mean), Bentkus's bound (shares of a run without a rounding
seed: the call cache on), and the persona excess (differences in [−1, 1], no
placebo flip: betting above the limit, at the level Holm's first step asks of it).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from decflow.metrics import bentkus, rounded_shares
from decflow.metrics.binomial import upper_tail
from decflow.metrics.bounded_mean import log_capital
from decflow.metrics.differences import DIFFERENCE_RANGE
from decflow.metrics.evidence import ALPHA, POWER
from decflow.metrics.search import first_true

Test = Literal["binomial", "rounded", "bentkus", "difference"]
EFFECTS = (1, 2, 4)
"""The effects a plan shows, in units of the limit."""
_MOST = 1_000_000


def failing_count(test: Test, n: int, limit: float, alpha: float) -> int | None:
    """The fewest cases (of n, all or nothing) with which the test shows the rate above the
    limit (None: not even all n)."""
    def shown(count: int) -> bool:
        if test == "binomial":
            return upper_tail(count, n, limit) < alpha
        if test == "rounded":
            return rounded_shares.p_above(count, n, limit) < alpha
        if test == "bentkus":
            return bentkus.p_above(count, n, limit) < alpha
        values = np.r_[np.ones(count), np.zeros(n - count)]
        return log_capital(values, limit, support=DIFFERENCE_RANGE) > math.log(1.0 / alpha)

    return first_true(shown, start=0, stop=n) if shown(n) else None


def cases_for_power(test: Test, limit: float, effect: float, *, alpha: float = ALPHA,
                    power: float = POWER) -> int | None:
    """Cases at which the test shows a rate of (1 + effect)·limit above the limit with
    `power` (None: the rate is 1 or more, or beyond `_MOST` cases)."""
    rate = (1.0 + effect) * limit
    if rate >= 1.0 or effect <= 0:
        return None

    def powered(n: int) -> bool:
        count = failing_count(test, n, limit, alpha)
        return count is not None and upper_tail(count, n, rate) >= power

    return first_true(powered, stop=_MOST)


def power_curve(test: Test, limit: float, *, alpha: float = ALPHA) -> list[dict[str, object]]:
    """Per effect in `EFFECTS`: the true rate and the cases needed to show it failing."""
    return [{"effect": k, "rate": (1 + k) * limit,
             "cases": cases_for_power(test, limit, k, alpha=alpha)} for k in EFFECTS]
