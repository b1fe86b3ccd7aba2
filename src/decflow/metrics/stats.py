"""Exact sign test and Holm's adjustment (the persona direction test, and every family).

The sign test uses integer arithmetic, so small counts (6:0, 8:0) give the textbook p-values
without rounding drift. Bounds and tri-state verdicts live in ``decflow.metrics.evidence``
and ``decflow.metrics.bounded_mean``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction


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
