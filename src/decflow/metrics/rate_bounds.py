"""One-sided tests of production rates, drops and bounded means from their counts and sums.

A production check keeps sufficient statistics (counts, sums), not per-record values, so the
evidence-gated production gates (docs/statistics.md, "Evidence-gated production gates") use
tests that need only those, each valid at every n:

- `rate_test`: a share of records (accuracy, coverage, abstention, fallback) against a
  limit by the exact binomial test (`binomial_test`); a limit of 0 (or an accuracy of 1) is a
  count: one occurrence fails.
- `drop_test`: the drop of a rate from the baseline's (accuracy drop), two independent
  binomial samples. The drop is shown above L when the baseline's lower and the window's
  upper Clopper–Pearson bounds, each at α/2, are further apart than L (a union bound: both
  hold together with probability ≥ 1 − α). Its p-value is the smallest α at which that
  happens: 2 · min_t max(P_t(X_B ≥ k_B), P_{t−L}(X ≤ k)), the two tails crossing at one t
  (computed only when it is below α; one at or above α rejects nothing, alone or under
  Holm, and is given as 1).
- `sum_mean_test`: the mean of values in [0, R] known only by their sum (Brier in [0, 2],
  NLL in [0, −log 1e-15]) by Hoeffding's (1963) Chernoff bound: for a mean at most μ,
  P(x̄ ≥ t) ≤ exp(−n·KL(t/R ‖ μ/R)) (KL of Bernoulli laws: values at the ends of the range are
  the worst case), so p = exp(−n·KL(x̄/R ‖ L/R)).

*Cases needed* and *detectable* are planning figures (normal approximations); only the
bounds and verdicts carry the error guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from decflow.metrics.binomial import (
    clopper_pearson_high,
    clopper_pearson_low,
    lower_tail,
    upper_tail,
)
from decflow.metrics.bounded_mean import binomial_test
from decflow.metrics.evidence import ALPHA, MeanTest
from decflow.metrics.noise_floor import larger_baseline

COUNT = "exact (Clopper-Pearson), a count: one occurrence fails"
DROP = "exact binomial bounds of both samples at α/2 each (union bound)"
CHERNOFF = "Chernoff bound of a bounded mean from its sum (Hoeffding 1963)"
_Z_POWER = 0.8416212335729143


# Windows and segments repeat the same (count, n, limit) often; these are pure.
_binomial = lru_cache(maxsize=8192)(binomial_test)
_cp_low = lru_cache(maxsize=8192)(clopper_pearson_low)
_cp_high = lru_cache(maxsize=8192)(clopper_pearson_high)


def _certain(count: int, n: int, limit: float, *, shown_above: bool) -> MeanTest:
    """A verdict the counts settle with certainty (a limit-0 count, or a limit the rate
    cannot cross), with the exact bounds beside it."""
    return MeanTest(
        method=COUNT, n=n, limit=limit, estimate=count / n,
        low=clopper_pearson_low(count, n, ALPHA), high=clopper_pearson_high(count, n, ALPHA),
        p_above=0.0 if shown_above else 1.0, p_below=1.0 if shown_above else 0.0,
        cases_needed=None, detectable=None)


def rate_test(count: int, n: int, limit: float, comparison: str, *,
              alpha: float = ALPHA) -> MeanTest | None:
    """`count` of `n` records against `rate <comparison> limit` (None when n = 0)."""
    if n == 0:
        return None
    if limit <= 0.0:  # `<= 0` is a count; `>= 0` always holds
        return _certain(count, n, limit, shown_above=count > 0 if comparison == "<=" else True)
    if limit >= 1.0:  # `>= 1` is a count of misses; `<= 1` always holds
        return _certain(count, n, limit, shown_above=count == n and comparison == ">=")
    return _binomial(count, n, limit, alpha=alpha)


def _crossing(rising: Callable[[float], float], falling: Callable[[float], float],
              lo: float, hi: float) -> float:
    """min over t in [lo, hi] of max(rising(t), falling(t)), a rising and a falling tail."""
    if rising(lo) >= falling(lo):
        return rising(lo)
    if rising(hi) <= falling(hi):
        return falling(hi)
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2.0
        if rising(mid) < falling(mid):
            lo = mid
        else:
            hi = mid
    return max(rising(hi), falling(lo))


def drop_test(base_count: int, base_n: int, count: int, n: int, limit: float, *,
              alpha: float = ALPHA) -> MeanTest | None:
    """baseline rate − rate (`base_count`/`base_n` − `count`/`n`) against `limit` ≥ 0
    (None when a side has no record)."""
    if n == 0 or base_n == 0:
        return None
    half = alpha / 2.0
    base_rate, rate = base_count / base_n, count / n
    estimate = base_rate - rate
    base_low, base_high = _cp_low(base_count, base_n, half), _cp_high(base_count, base_n, half)
    now_low, now_high = _cp_low(count, n, half), _cp_high(count, n, half)
    low, high = max(-1.0, base_low - now_high), min(1.0, base_high - now_low)
    # t is the baseline's rate, t − limit the window's; a tail at a rate outside [0, 1] is
    # 0 or 1 (`binomial`), so the search runs over every baseline rate. A p-value is refined
    # only below α (its bound clears the limit): one at or above α rejects nothing, alone or
    # under Holm, and is given as 1.
    p_above = 1.0 if low <= limit else 2.0 * _crossing(
        lambda t: upper_tail(base_count, base_n, t),
        lambda t: lower_tail(count, n, t - limit), 0.0, 1.0)
    p_below = 1.0 if high >= limit else 2.0 * _crossing(
        lambda t: upper_tail(count, n, t - limit),
        lambda t: lower_tail(base_count, base_n, t), 0.0, 1.0)
    # Planning: the two exact margins on the side the estimate lies, the window's scaled as
    # 1/√n (the baseline's stays), so n′ = n reproduces this check's own bound. With no room
    # left beside the baseline's margin, no window size decides it: a larger baseline would.
    above = estimate >= limit
    base_margin = (base_rate - base_low) if above else (base_high - base_rate)
    now_margin = (now_high - rate) if above else (rate - now_low)
    room = abs(estimate - limit) - base_margin
    needed = (None if room <= 0.0 or now_margin <= 0.0
              else max(1, math.ceil(n * (now_margin / room) ** 2)))
    stuck = (larger_baseline(base_n),) if room <= 0.0 < abs(estimate - limit) else ()
    sd = math.sqrt(base_rate * (1 - base_rate) / base_n + rate * (1 - rate) / n)
    return MeanTest(
        method=DROP,
        n=n,
        limit=limit,
        estimate=estimate,
        low=low,
        high=high,
        p_above=min(1.0, p_above, 0.999999 * alpha) if low > limit else 1.0,
        p_below=min(1.0, p_below, 0.999999 * alpha) if high < limit else 1.0,
        cases_needed=needed,
        detectable=base_margin + now_margin + _Z_POWER * sd,
        notes=(f"baseline {base_count} of {base_n}", *stuck),
    )


def _kl(u: float, m: float) -> float:
    """KL(Bernoulli(u) ‖ Bernoulli(m)), m in (0, 1)."""
    out = 0.0
    if u > 0.0:
        out += u * math.log(u / m)
    if u < 1.0:
        out += (1.0 - u) * math.log((1.0 - u) / (1.0 - m))
    return max(out, 0.0)


def kl_bound(u: float, n: int, alpha: float, *, upper: bool) -> float:
    """The one-sided (1 − α) Chernoff bound on the mean of n values in [0, 1] with mean u:
    the m on the `upper` (or lower) side of u where n·KL(u ‖ m) = log(1/α)."""
    threshold = math.log(1.0 / alpha)
    lo, hi = (u, 1.0) if upper else (0.0, u)
    edge = 1.0 - 1e-15 if upper else 1e-15
    if n * _kl(u, edge) <= threshold:
        return 1.0 if upper else 0.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        inside = n * _kl(u, mid) <= threshold
        if inside == upper:
            lo = mid
        else:
            hi = mid
    return lo if upper else hi


def sum_mean_test(total: float, n: int, limit: float, upper: float, *,
                  alpha: float = ALPHA) -> MeanTest | None:
    """The mean of `n` values in [0, `upper`] summing to `total` against `limit`."""
    if n == 0:
        return None
    u = min(max(total / n / upper, 0.0), 1.0)
    m = limit / upper
    low = kl_bound(u, n, alpha, upper=False) * upper
    high = kl_bound(u, n, alpha, upper=True) * upper
    if m <= 0.0 or m >= 1.0:  # `<= 0`: any positive value shows it fails; `<= upper` holds
        fails = m <= 0.0 and u > 0.0
        return MeanTest(CHERNOFF, n, limit, u * upper, low, high, 0.0 if fails else 1.0,
                        0.0 if m >= 1.0 else 1.0, None, None)
    evidence = math.exp(-n * _kl(u, m))
    rate = _kl(u, m)
    # the test rejects about √(2 log 1/α) standard deviations (at most √(m(1 − m))) away
    reach = (math.sqrt(2.0 * math.log(1.0 / alpha)) + _Z_POWER) * upper * math.sqrt(
        m * (1.0 - m) / n)
    return MeanTest(
        method=CHERNOFF,
        n=n,
        limit=limit,
        estimate=u * upper,
        low=low,
        high=high,
        p_above=evidence if u > m else 1.0,
        p_below=evidence if u < m else 1.0,
        cases_needed=None if rate == 0.0 else max(1, math.ceil(math.log(1.0 / alpha) / rate)),
        detectable=reach if reach <= upper else None,
    )
