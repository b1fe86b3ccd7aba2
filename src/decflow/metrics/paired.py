"""Paired difference of two proportions measured on the same cases (Tango's score method).

A regression diff sees every case twice: the baseline got it right or wrong, and so did the
candidate. With b = cases right before and wrong now and c = the reverse, out of n cases
decided and labeled on both sides, the accuracy drop is δ̂ = (b − c)/n. The cases that both
got right or both got wrong carry no information on δ, but they do count in n, which is why
an unpaired comparison of the two accuracies (two independent binomials) is far too wide
when the runs agree on most cases, and far too narrow when they disagree on many.

Tango's score statistic (Statistics in Medicine 17:891, 1998) for H0: δ = δ₀ is

    Z(δ₀) = (b − c − n·δ₀) / √(n · (2·p̃₂₁ + δ₀(1 − δ₀)))

(decflow moves the numerator one count towards 0: a continuity correction that keeps the
exact size at most α per side at small n, see ``CONTINUITY``)

with p̃₂₁ the maximum-likelihood estimate of the "wrong before, right now" probability under
the constraint δ = δ₀: p̃₂₁ = (√(B² − 4AC) − B) / (2A), A = 2n, B = −b − c + (2n − b + c)δ₀,
C = −c·δ₀(1 − δ₀). Z is decreasing in δ₀, so the one-sided 95 % bounds are the δ₀ where
Z = ±z₀.₉₅, found by bisection, and the non-inferiority test of the drop against a margin Δ
reads Z(Δ): its one-sided p-values are 1 − Φ(Z(Δ)) for "the drop exceeds Δ" and Φ(Z(Δ)) for
"the drop is below Δ". Score intervals keep close to their nominal coverage at small n and
never leave [−1, 1] (Agresti & Min 2005, Fagerland et al. 2014), where a Wald interval
collapses to a point when b = c = 0.

The exact McNemar test of b against c (δ = 0) is reported beside it as information. Cases
needed and the detectable effect use the variance under the margin at the observed rates
(planning figures; only the bounds and p-values carry the level).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from decflow.metrics.evidence import ALPHA, POWER, MeanTest
from decflow.metrics.stats import sign_test

_NORMAL = NormalDist()
_BISECTION_STEPS = 200
# One count off the numerator. Without a correction the upper tail of b − c (right-skewed
# when the discordant counts are small) made the test at the margin FAIL 6.45 % of 2,000
# simulated diffs at 200 cases (α = 5 %); half a count still left exact sizes up to 6.38 %
# (n = 12, margin 0.02), 6.13 % (n = 50, margin 0.1, rare discordance). When
# every case is discordant b − c moves in steps of 2, and a full count is half a step. With
# it the exact size is at most 4.98 % per side over 17 n from 5 to 500, margins 0.01–0.3 and
# 225 nuisance values each (bench/regression_exact_size.py; docs/statistics.md).
CONTINUITY = 1.0


TANGO = "paired difference of proportions (Tango score), case as unit"


def _constrained_p21(b: int, c: int, n: int, delta: float) -> float:
    a_coef = 2.0 * n
    b_coef = -b - c + (2.0 * n - b + c) * delta
    c_coef = -c * delta * (1.0 - delta)
    root = math.sqrt(max(b_coef * b_coef - 4.0 * a_coef * c_coef, 0.0))
    return max((root - b_coef) / (2.0 * a_coef), 0.0)


def tango_statistic(b: int, c: int, n: int, delta: float,
                    correction: float = CONTINUITY) -> float:
    """Z(δ₀), its numerator moved `correction` counts towards 0; ±inf where the variance
    under δ₀ vanishes (δ₀ = ±1 or no discordance)."""
    if n <= 0:
        raise ValueError(f"tango_statistic needs n > 0, got {n}")
    raw = b - c - n * delta
    numerator = math.copysign(max(abs(raw) - correction, 0.0), raw)
    variance = n * (2.0 * _constrained_p21(b, c, n, delta) + delta * (1.0 - delta))
    if variance <= 0.0:
        if numerator == 0.0:
            return 0.0
        return math.inf if numerator > 0 else -math.inf
    return numerator / math.sqrt(variance)


def _root(b: int, c: int, n: int, target: float) -> float:
    """The δ₀ in [−1, 1] where Z(δ₀) = target (Z decreases in δ₀)."""
    lo, hi = -1.0, 1.0
    if tango_statistic(b, c, n, lo) <= target:
        return lo
    if tango_statistic(b, c, n, hi) >= target:
        return hi
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if tango_statistic(b, c, n, mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2.0


def tango_bounds(b: int, c: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """One-sided (1 − α) lower and upper bounds of δ (together a 1 − 2α interval)."""
    z = _NORMAL.inv_cdf(1.0 - alpha)
    return _root(b, c, n, z), _root(b, c, n, -z)


def _variance_at(b: int, c: int, n: int, delta: float) -> float:
    """Per-case variance of b − c − n·δ under δ = delta at the observed rates."""
    return 2.0 * _constrained_p21(b, c, n, delta) + delta * (1.0 - delta)


def paired_proportions(
    b: int, c: int, n: int, limit: float, *, alpha: float = ALPHA
) -> MeanTest:
    """Bounds, non-inferiority p-values against ``limit`` and sizing for δ = (b − c)/n, as
    the inference core's `MeanTest` (so verdicts, Holm families and evidence records read
    it like any other test). The exact McNemar p-value of δ = 0 goes in its notes."""
    if min(b, c) < 0 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n, got b={b}, c={c}, n={n}")
    # the exact McNemar test is the sign test on the discordant cells
    mcnemar = (f"McNemar exact p = {sign_test(b, c):.3g} ({b} newly worse, {c} newly "
               "better; information)",)
    if n == 0:
        return MeanTest(TANGO, 0, limit, None, -1.0, 1.0, 1.0, 1.0, None, None, mcnemar)
    estimate = (b - c) / n
    low, high = tango_bounds(b, c, n, alpha)
    statistic = tango_statistic(b, c, n, limit)
    z_alpha, z_power = _NORMAL.inv_cdf(1.0 - alpha), _NORMAL.inv_cdf(POWER)
    spread = math.sqrt(max(_variance_at(b, c, n, limit), 1.0 / n))
    gap = abs(estimate - limit)
    needed = None if gap == 0.0 else _cases_needed(gap, spread, z_alpha)
    return MeanTest(
        method=TANGO,
        n=n,
        limit=limit,
        estimate=estimate,
        low=low,
        high=high,
        p_above=_upper_tail(statistic),
        p_below=_upper_tail(-statistic),
        cases_needed=needed,
        detectable=(z_alpha + z_power) * spread / math.sqrt(n),
        notes=mcnemar,
    )


def _cases_needed(gap: float, spread: float, z: float) -> int:
    """The n where the statistic at the observed rates reaches z: (gap·n − CONTINUITY) /
    (spread·√n) = z, a quadratic in √n. With the continuity correction in it, n′ = n
    reproduces this check's own statistic (without it the figure fell short: a drop of 12 of
    100 against 0.05 read 'about 41 cases needed' while its p-value at 100 was 0.013)."""
    root = (z * spread + math.sqrt((z * spread) ** 2 + 4.0 * gap * CONTINUITY)) / (2.0 * gap)
    return max(math.ceil(root * root - 1e-9), 1)  # n exactly reached is n, not n + 1


def _upper_tail(statistic: float) -> float:
    if math.isinf(statistic):
        return 0.0 if statistic > 0 else 1.0
    return 1.0 - _NORMAL.cdf(statistic)
