"""Bentkus's tail bound: exact-binomial-like p-values for a sum of values anywhere in [0, 1].

For independent X₁ … Xₙ in [0, 1] with mean at most m, the sum S is smaller than
B ~ Binomial(n, m) in the increasing convex order (each Xᵢ is dominated in convex order by a
0/1 value of the same mean, because a convex function on [0, 1] lies below its chord;
sums of independent dominated values stay dominated; Hoeffding 1956 spreads unequal means
into one; a smaller mean only lowers an increasing function). (x − h)₊ is increasing and
convex, so E(S − h)₊ ≤ E(B − h)₊, and Markov's inequality gives, for every h < s,

    P(S ≥ s) ≤ E(B − h)₊ / (s − h)

(Bentkus 2004, "On Hoeffding's inequalities", Ann. Probab. 32(2)). The p-value is the
smallest of these bounds. E(B − h)₊ is piecewise linear in h with kinks at the integers,
and on each piece the ratio is monotone, so the smallest bound is at an integer h. The
lower side is the same with (h − x)₊ and h > s.

What it costs: with 0/1 values (all or nothing) S is the binomial count itself, and the
bound stays within a small factor of the exact binomial tail (at most e; measured in
docs/statistics.md); with no occurrence at all it is the exact (1 − m)ⁿ. What it does not
do is adapt to a spread smaller than the 0/1 worst case: it is the test for shares that
may cluster all or nothing, which is where the case-level betting test pays most.

Sums here may be fractional (shares of several observations per case).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from decflow.metrics.search import first_true, lower_edge, upper_edge

Floats = npt.NDArray[np.float64]


_TOLERANCE = 1e-8  # of the bounds (shown to four digits; verdicts come from the p-values)
_REACH = 12.0
"""Standard deviations beyond which the binomial's mass is left out (below e⁻⁷², far under
any p-value a verdict compares)."""


def _window(total: float, n: int, m: float) -> tuple[int, int]:
    """The whole counts whose mass and hinges can matter for a sum `total`: from below the
    smaller of it and the mean to above the larger, by `_REACH` standard deviations."""
    spread = _REACH * math.sqrt(n * m * (1.0 - m)) + 2.0
    low = math.floor(min(total, n * m) - spread)
    high = math.ceil(max(total, n * m) + spread)
    return max(low, 0), min(high, n)


def binomial_pmf(n: int, m: float, low: int = 0, high: int | None = None) -> Floats:
    """P(B = j), j = low … high, for B ~ Binomial(n, m) (by the ratio of successive terms
    from one log-gamma value, so a window of a large n costs its width only)."""
    high = n if high is None else high
    j = np.arange(low, high + 1, dtype=np.float64)
    if m <= 0.0 or m >= 1.0:
        return np.where(j == (0 if m <= 0.0 else n), 1.0, 0.0)
    start = (math.lgamma(n + 1) - math.lgamma(low + 1) - math.lgamma(n - low + 1)
             + low * math.log(m) + (n - low) * math.log1p(-m))
    steps = np.log((n - j[:-1]) / (j[:-1] + 1.0)) + math.log(m) - math.log1p(-m)
    return np.exp(start + np.concatenate(([0.0], np.cumsum(steps))))


def _hinges(total: float, n: int, m: float, above: bool) -> tuple[Floats, Floats]:
    """(whole h in the window, E(B − h)₊ for `above`, else E(h − B)₊ at each)."""
    low, high = _window(total, n, m)
    pmf = binomial_pmf(n, m, low, high)
    h = np.arange(low, high + 1, dtype=np.float64)
    if above:
        tail = np.cumsum(pmf[::-1])[::-1]  # P(B ≥ j)
        summed = np.cumsum(tail[::-1])[::-1]  # Σ_{i ≥ j} P(B ≥ i)
        return h, np.concatenate((summed[1:], [0.0]))
    cdf = np.cumsum(pmf)  # P(B ≤ j), the mass below the window left out
    return h, np.concatenate(([0.0], np.cumsum(cdf)[:-1]))


def _smallest_ratio(excess: Floats, distance: Floats, usable: npt.NDArray[np.bool_]) -> float:
    if not usable.any():
        return 1.0
    return min(1.0, float(np.min(excess[usable] / distance[usable])))


def p_above(total: float, n: int, m: float) -> float:
    """Bentkus p-value of H0: mean ≤ m, from a sum `total` of n values in [0, 1]."""
    if n == 0 or total <= 0.0:
        return 1.0
    h, excess = _hinges(total, n, m, above=True)
    # Below the window E(B − h)₊ = n·m − h, a ratio that only grows as h falls when the
    # sum is above the mean (and p ≈ 1 otherwise): the window holds the smallest.
    return _smallest_ratio(excess, total - h, h < total)


def p_below(total: float, n: int, m: float) -> float:
    """Bentkus p-value of H0: mean ≥ m, from a sum `total` of n values in [0, 1]."""
    if n == 0 or total >= n:
        return 1.0
    h, excess = _hinges(total, n, m, above=False)
    return _smallest_ratio(excess, h - total, h > total)


def lower_bound(total: float, n: int, alpha: float) -> float:
    """The one-sided (1 − α) lower bound on the mean: the m where p_above crosses α."""
    return lower_edge(lambda m: p_above(total, n, m), total, n, alpha, _TOLERANCE)


def upper_bound(total: float, n: int, alpha: float) -> float:
    """The one-sided (1 − α) upper bound on the mean: the m where p_below crosses α."""
    return upper_edge(lambda m: p_below(total, n, m), total, n, alpha, _TOLERANCE)


def critical_counts(n: int, m: float, alpha: float) -> tuple[int, int]:
    """(the largest whole count whose p_below is under α, −1 if none; the smallest whose
    p_above is, n + 1 if none): the counts at which the test decides (the p-values are
    monotone in the count, so both are found by bisection)."""
    not_passing = first_true(lambda c: p_below(c, n, m) >= alpha, start=0, stop=n + 1)
    failing = first_true(lambda c: p_above(c, n, m) < alpha, start=0, stop=n + 1)
    return (n if not_passing is None else not_passing) - 1, n + 1 if failing is None else failing
