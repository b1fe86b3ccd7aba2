"""The paired accuracy-drop verdict keeps α per side at the margin: exact sizes.

Cases are independent; each is newly wrong (right before, wrong now) with probability p₁₂,
newly right with p₂₁, unchanged otherwise, so the drop is δ = p₁₂ − p₂₁ and the counts
(b, c) are trinomial. At δ = Δ (the margin) a FAIL is wrong, and so is a PASS. The verdict
depends on (b, c) only, so its probability is an exact sum: for each c, the FAIL region
is b ≥ b_fail(c) and the PASS region b ≤ b_pass(c) (the statistic grows with b; checked
cell by cell at small n), and b given c is Binomial(n − c, p₁₂ / (1 − p₂₁)).

The nuisance p₂₁ ranges over (0, (1 − Δ)/2]; the worst cases sit where discordance is rare
(a few newly wrong cases, right-skewed counts) and where every case is discordant. With
half a count of continuity correction the score test was liberal there: exact sizes
6.13 % (n = 50, Δ = 0.1, p₂₁ = 0.013), 5.99 % PASS (n = 30, Δ = 0.05, every case
discordant), 5.41 % (n = 200, Δ = 0.02, p₂₁ = 0.004). Run as a script to print the worst
size per (n, Δ) recorded in docs/statistics.md.
"""

from __future__ import annotations

import math

import numpy as np

from decflow.metrics.paired import paired_proportions

ALPHA = 0.05


def regions(n: int, margin: float) -> tuple[list[int], list[int]]:
    """Per c: the smallest b that FAILs (n − c + 1: none) and the largest that PASSes (−1)."""
    fail_from, pass_to = [], []
    for c in range(n + 1):
        top = n - c
        fails = [b for b in range(top + 1) if paired_proportions(b, c, n, margin).p_above < ALPHA]
        passes = [b for b in range(top + 1) if paired_proportions(b, c, n, margin).p_below < ALPHA]
        # The regions are the two ends of b's range (the statistic increases with b).
        assert fails == list(range(top + 1 - len(fails), top + 1)), (n, c)
        assert passes == list(range(len(passes))), (n, c)
        fail_from.append(top + 1 - len(fails))
        pass_to.append(len(passes) - 1)
    return fail_from, pass_to


def binomial_pmf(m: int, q: float) -> np.ndarray:
    return np.array([math.comb(m, k) * q**k * (1 - q) ** (m - k) for k in range(m + 1)])


def sizes(n: int, margin: float, p21: float, fail_from: list[int], pass_to: list[int]
          ) -> tuple[float, float]:
    """Exact P(FAIL) and P(PASS) at δ = margin with newly-right probability p21."""
    p12 = p21 + margin
    fail = passed = 0.0
    for c in range(n + 1):
        weight = math.comb(n, c) * p21**c * (1 - p21) ** (n - c)
        if weight < 1e-15:
            continue
        pmf = binomial_pmf(n - c, p12 / (1 - p21))
        fail += weight * float(pmf[fail_from[c]:].sum())
        passed += weight * float(pmf[: pass_to[c] + 1].sum())
    return fail, passed


def worst(n: int, margin: float) -> tuple[float, float]:
    fail_from, pass_to = regions(n, margin)
    edge = (1 - margin) / 2
    nuisance = sorted({0.0, 0.001, 0.004, 0.0134, 0.03, 0.1, 0.2, 0.3, 0.4, edge - 0.01, edge})
    found = [sizes(n, margin, p, fail_from, pass_to) for p in nuisance if p <= edge]
    return max(f for f, _ in found), max(p for _, p in found)


CASES = [(20, 0.02), (20, 0.1), (30, 0.05), (50, 0.02), (50, 0.1), (200, 0.02)]


def test_the_accuracy_drop_at_the_margin_keeps_alpha_per_side_exactly() -> None:
    for n, margin in CASES:
        fail, passed = worst(n, margin)
        assert fail <= ALPHA and passed <= ALPHA, (n, margin, fail, passed)


if __name__ == "__main__":
    for n, margin in CASES:
        fail, passed = worst(n, margin)
        print(f"n={n} margin={margin}: worst wrong FAIL {fail:.4f}, wrong PASS {passed:.4f}")
