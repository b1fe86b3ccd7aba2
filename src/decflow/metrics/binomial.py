"""Exact binomial tails and Clopper–Pearson bounds, for any n, without a special-function library.

The binomial tail is a regularized incomplete beta function,
P(X ≥ k) = I_p(k, n − k + 1) for X ~ Binomial(n, p), evaluated by its continued fraction
(the modified Lentz algorithm, to 1e-15 relative), so a million trials cost the same as ten.
The Clopper–Pearson bounds invert those tails by bisection on p. They are exact: the one-sided
upper bound at level α is below the true rate with probability at most α, for every n and every
true rate (conservative because the count is discrete).
"""

from __future__ import annotations

import math
from collections.abc import Callable

_TINY = 1e-300
_EPS = 1e-15
_MAX_TERMS = 10_000


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), valid where x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS + 1):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if a <= 0.0 or b <= 0.0:
        raise ValueError(f"beta parameters must be positive, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def upper_tail(k: float, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p); k may be fractional (a rate held at a larger n)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return regularized_beta(k, n - k + 1.0, p)


def lower_tail(k: float, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p)."""
    return 1.0 - upper_tail(k + 1.0, n, p)


def _bisect(predicate_true_below: Callable[[float], bool], lo: float, hi: float) -> float:
    """The boundary in [lo, hi] of a predicate that holds below it (to 1e-13)."""
    while hi - lo > 1e-13:
        mid = (lo + hi) / 2.0
        if predicate_true_below(mid):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def clopper_pearson_low(k: float, n: int, alpha: float) -> float:
    """One-sided (1 − α) lower bound on the rate: the p with P_p(X ≥ k) = α (0 when k = 0)."""
    if k <= 0:
        return 0.0
    return _bisect(lambda p: upper_tail(k, n, p) < alpha, 0.0, 1.0)


def clopper_pearson_high(k: float, n: int, alpha: float) -> float:
    """One-sided (1 − α) upper bound on the rate: the p with P_p(X ≤ k) = α (1 when k = n).

    With k = 0 this is 1 − α^(1/n), the bound of "0 of n"."""
    if k >= n:
        return 1.0
    if k <= 0:
        return float(1.0 - alpha ** (1.0 / n))
    return _bisect(lambda p: lower_tail(k, n, p) > alpha, 0.0, 1.0)
