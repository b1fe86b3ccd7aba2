"""Monotone searches shared by the tests of the inference core: the first n at which a
predicate that stays true once true holds, the edge of a rejected set, and the one-sided
bounds on a mean in [0, 1] where a test's p-value crosses α."""

from __future__ import annotations

from collections.abc import Callable

MAX_CASES = 10_000_000
"""No planning figure searches beyond this many cases."""


def first_true(predicate: Callable[[int], bool], start: int = 1,
               stop: int = MAX_CASES) -> int | None:
    """The smallest n in [start, stop] where a predicate that stays true once true holds
    (None: not even at `stop`)."""
    hi = min(max(start, 1), stop)
    while not predicate(hi):
        if hi >= stop:
            return None
        hi = min(hi * 2, stop)
    lo = start - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid
    return hi


def edge(rejects: Callable[[float], bool], inside: float, outside: float,
         tolerance: float = 1e-10) -> float:
    """Between a point that is not rejected and one that is, the edge of the rejected set
    (bisection; the returned point is not rejected)."""
    for _ in range(200):
        if abs(outside - inside) < tolerance:
            break
        mid = (inside + outside) / 2.0
        if rejects(mid):
            outside = mid
        else:
            inside = mid
    return inside


def lower_edge(p_above: Callable[[float], float], total: float, n: int, alpha: float,
               tolerance: float) -> float:
    """The one-sided (1 − α) lower bound on a mean in [0, 1] from `total` over n values:
    the candidate mean m where `p_above(m)` (increasing in m) crosses α."""
    if n == 0 or total <= 0:
        return 0.0
    return edge(lambda m: p_above(m) < alpha, total / n, 0.0, tolerance=tolerance)


def upper_edge(p_below: Callable[[float], float], total: float, n: int, alpha: float,
               tolerance: float) -> float:
    """The one-sided (1 − α) upper bound on a mean in [0, 1] from `total` over n values:
    the candidate mean m where `p_below(m)` (decreasing in m) crosses α."""
    if n == 0 or total >= n:
        return 1.0
    return edge(lambda m: p_below(m) < alpha, total / n, 1.0, tolerance=tolerance)
