"""Interval estimates and exact tests behind the stability meter and the persona-flip axes.

Every verdict is read from an interval bound, never from a point estimate: a handful of
quiet pairs must come out *undecided*, not "stable". The exact binomial tests use integer
arithmetic, so small counts (6:0, 8:0) give the textbook p-values without rounding drift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Literal

Z95 = 1.96

Verdict = Literal["stochastic", "deterministic", "undecided"]


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for k successes in n trials.

    n = 0 gives the vacuous interval (0, 1), which every ε in (0, 1) classifies as undecided.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    margin = z * math.sqrt((p * (1.0 - p) + z2 / (4 * n)) / n) / denom
    return max(0.0, centre - margin), min(1.0, centre + margin)


def classify(lo: float, hi: float, epsilon: float) -> Verdict:
    """Tri-state from the bounds; strict on both sides, so an interval touching ε is undecided."""
    if lo > epsilon:
        return "stochastic"
    if hi < epsilon:
        return "deterministic"
    return "undecided"


def pairs_needed(epsilon: float, p_hat: float = 0.0, z: float = Z95) -> int | None:
    """Smallest number of pairs whose Wilson upper bound falls below ε if the rate stays p̂.

    n* = ⌊z²ε(1−ε)/(ε−p̂)²⌋ + 1, evaluated in exact rationals of the decimal inputs so the
    floor does not wobble at integer boundaries. None when p̂ ≥ ε: no number of pairs can
    certify a rate that is not below the tolerance.
    """
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    if p_hat >= epsilon:
        return None
    eps, p, zz = Fraction(str(epsilon)), Fraction(str(p_hat)), Fraction(str(z))
    return math.floor(zz * zz * eps * (1 - eps) / ((eps - p) ** 2)) + 1


def sign_test(b: int, c: int) -> float:
    """Two-sided exact sign test of b against c under Binomial(b + c, ½).

    p = min(1, 2·Σ_{i ≤ min(b, c)} C(b+c, i) / 2^{b+c}); no discordant observations gives 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def mcnemar_exact(b: int, c: int) -> float:
    """Exact McNemar test on the discordant cells of a paired 2×2 table.

    Conditional on b + c discordant pairs, b is Binomial(b + c, ½) under the null, so the
    exact McNemar test is the sign test applied to the discordant cells.
    """
    return sign_test(b, c)


def student_t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with an integer number of degrees of freedom.

    Exact finite series in θ = atan(t/√df) (Abramowitz & Stegun 26.7.3 and 26.7.4), so no
    special-function library is needed: for odd df
    A = (2/π)(θ + sinθ cosθ (1 + (2/3)cos²θ + (2·4)/(3·5)cos⁴θ + …)), for even df
    A = sinθ (1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + …), where A = P(|T| ≤ |t|).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    c2 = cos * cos
    term = total = 1.0
    if df % 2:
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2.0 / math.pi * (theta + (sin * cos * total if df > 1 else 0.0))
    else:
        for k in range(1, (df - 2) // 2 + 1):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = sin * total
    tail = max(0.0, (1.0 - inside) / 2.0)
    return tail if t >= 0 else 1.0 - tail


@lru_cache(maxsize=4096)
def student_t_quantile(q: float, df: int) -> float:
    """The t with P(T ≤ t) = q, by bisection on ``student_t_sf`` (to 1e-12); cached, since
    every axis of a run asks for the same few levels."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if q < 0.5:
        return -student_t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - q:
        hi *= 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        if student_t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, returned in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
