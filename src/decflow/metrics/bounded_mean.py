"""One-sided tests and bounds for the mean of bounded per-case values, valid at every n.

Two methods, both exact in the sense that their error rates hold for every number of cases
and every distribution of the per-case values in the stated range (no normal or t
approximation anywhere):

- ``binomial_test(count, n, limit)`` for per-case values that are 0 or 1 by construction
  (one follow-up per input, an errored case): the exact binomial test and its
  Clopper–Pearson bounds.
- ``mean_test(values, limit, support=(lo, hi))`` for per-case values anywhere in a known
  range (a case's share of flipped pairs, a paired difference in [−1, 1]): testing by
  betting (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by
  betting", JRSS-B 86(1)). For a candidate mean m, a gambler who bets a fraction λ of its
  capital on each value being above m ends with K_λ(m) = Π (1 + λ(xᵢ − m)); if the true mean
  is at most m, E[K_λ(m)] ≤ 1, so by Markov's inequality K_λ(m) ≥ 1/α happens with
  probability ≤ α. decflow bets with a fixed mixture of fractions (WSR's "diversified
  Kelly" with weights): K(m) = Σⱼ wⱼ Πᵢ (1 + cⱼ(xᵢ − m)/(m − lo)), cⱼ = 2⁻ʲ (j = 0 … 11),
  wⱼ ∝ 1/(j + 1)². A mixture of e-values is an e-value, so the p-value 1/K(m) is valid
  at every n (and under optional stopping); the mixture adapts to the unknown spread, and
  it does not depend on the order of the cases, so a report reproduces exactly and error
  rates on lattice data (shares of k pairs) can be computed exactly. cⱼ = 1 is the
  all-in bet: with values at 0 and a limit L it certifies "mean < L" after the same
  number of quiet cases as the exact "0 of n" bound, times the cost of its weight.
  The upper side bets on values below m with λ = cⱼ/(hi − m).

Bounds are the limits of the set of m not rejected (the capital is monotone in m, so the set
is an interval), found by bisection to 1e-10 and clipped to the support. Which method fits
is decided by what the values are (0/1 by construction or not), never by the data seen.

Sizing (``cases_needed``, ``detectable``):
- binomial: exact. Cases needed at the observed rate p̂ are the smallest n′ at which the
  Clopper–Pearson bound with p̂·n′ occurrences clears the limit; the detectable effect is
  the distance from the limit at which the exact test has 80 % power at this n.
- betting: cases needed are the smallest n′ at which the capital, grown at the observed
  per-case rate (the sample replicated), reaches 1/α; the detectable effect uses the
  observed values shifted to the limit ± δ (clipped to the support) and a normal
  approximation of the log-capital (mean − 0.84 sd ≥ log 1/α). These two are planning
  figures; only the bounds and verdicts carry the error guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from decflow.metrics import bentkus
from decflow.metrics.binomial import (
    clopper_pearson_high,
    clopper_pearson_low,
    lower_tail,
    upper_tail,
)
from decflow.metrics.evidence import ALPHA, POWER, MeanTest
from decflow.metrics.search import edge, first_true

BINOMIAL = "exact binomial (Clopper-Pearson), case as unit"
BETTING = "betting (WSR mixture), case as unit"
BENTKUS = "Bentkus (binomial worst case for shares in [0, 1]), case as unit"

FRACTIONS = 2.0 ** -np.arange(12)
"""The fractions cⱼ of the largest safe bet the mixture spreads its capital over."""
WEIGHTS = 1.0 / (np.arange(12) + 1.0) ** 2
WEIGHTS = WEIGHTS / WEIGHTS.sum()
_LOG_WEIGHTS = np.log(WEIGHTS)
_Z_POWER = 0.8416212335729143  # the standard normal quantile at POWER = 0.80


# --- exact binomial -------------------------------------------------------------------------


def binomial_test(count: int, n: int, limit: float, *, alpha: float = ALPHA) -> MeanTest:
    """Exact one-sided tests of a rate against ``limit`` in (0, 1), with Clopper–Pearson
    bounds; n = 0 is a test with no evidence (p-values 1, bounds the whole range)."""
    if not 0.0 < limit < 1.0:
        raise ValueError(f"the limit must be in (0, 1), got {limit} (a limit of 0 is a count)")
    if n < 0 or not 0 <= count <= n:
        raise ValueError(f"binomial_test needs 0 <= count <= n, got {count} of {n}")
    if n == 0:
        return MeanTest(BINOMIAL, 0, limit, None, 0.0, 1.0, 1.0, 1.0, None, None)
    rate = count / n
    return MeanTest(
        method=BINOMIAL,
        n=n,
        limit=limit,
        estimate=rate,
        low=clopper_pearson_low(count, n, alpha),
        high=clopper_pearson_high(count, n, alpha),
        p_above=upper_tail(count, n, limit),
        p_below=lower_tail(count, n, limit),
        cases_needed=binomial_cases_needed(rate, limit, alpha),
        detectable=_binomial_detectable(n, limit, above=rate >= limit, alpha=alpha),
    )


def binomial_cases_needed(rate: float, limit: float, alpha: float) -> int | None:
    """Cases at which a 0/1 count at ``rate`` would decide the exact test on its side."""
    if rate == limit:
        return None
    if rate > limit:
        return first_true(lambda m: clopper_pearson_low(rate * m, m, alpha) > limit)
    return first_true(lambda m: clopper_pearson_high(rate * m, m, alpha) < limit)


def _binomial_detectable(n: int, limit: float, *, above: bool, alpha: float) -> float | None:
    """Distance from the limit at which the exact test rejects with 80 % power."""
    # The tails are monotone in the count, so the critical counts are found by bisection
    # (a few dozen tail evaluations) rather than by evaluating the tail at every count.
    if above:
        lowest = first_true(lambda k: upper_tail(k, n, limit) < alpha, start=0, stop=n)
        return None if lowest is None else power_distance(n, limit, lowest, above=True)
    first_not_below = first_true(lambda k: lower_tail(k, n, limit) >= alpha, start=0, stop=n)
    if not first_not_below:
        return None
    return power_distance(n, limit, first_not_below - 1, above=False)


def power_distance(n: int, limit: float, critical: int, *, above: bool) -> float:
    """How far from the limit a rate must lie for a 0/1 count over n cases to reach the
    `critical` count (at least it above, at most it below) with 80 % power."""
    if above:
        return edge(lambda p: not upper_tail(critical, n, p) >= POWER, 1.0, limit,
                    tolerance=1e-7) - limit
    return limit - edge(lambda p: not lower_tail(critical, n, p) >= POWER, 0.0, limit,
                        tolerance=1e-7)


# --- Bentkus: shares in [0, 1] that may cluster all or nothing ------------------------------


def check_shares(shares: Sequence[float] | npt.NDArray[np.float64],
                 limit: float) -> npt.NDArray[np.float64]:
    """The shares as an array, refused unless each lies in [0, 1] and the limit in (0, 1)."""
    if not 0.0 < limit < 1.0:
        raise ValueError(f"the limit must be in (0, 1), got {limit} (a limit of 0 is a count)")
    x = np.asarray(shares, dtype=np.float64)
    if x.size and (not np.isfinite(x).all() or x.min() < 0.0 or x.max() > 1.0):
        raise ValueError("per-case shares must lie in [0, 1]")
    return x


def bentkus_test(shares: Sequence[float] | npt.NDArray[np.float64], limit: float, *,
                 alpha: float = ALPHA) -> MeanTest:
    """Tests of the mean of per-case shares in [0, 1] against ``limit`` in (0, 1) by
    Bentkus's bound (``decflow.metrics.bentkus``): the exact binomial test's worst case,
    valid for any values in [0, 1]; the bounds are where its p-values cross α."""
    x = check_shares(shares, limit)
    n = int(x.size)
    if n == 0:
        return MeanTest(BENTKUS, 0, limit, None, 0.0, 1.0, 1.0, 1.0, None, None)
    total = math.fsum(x.tolist())
    rate = min(max(total / n, 0.0), 1.0)
    return MeanTest(
        method=BENTKUS,
        n=n,
        limit=limit,
        estimate=rate,
        low=bentkus.lower_bound(total, n, alpha),
        high=bentkus.upper_bound(total, n, alpha),
        p_above=bentkus.p_above(total, n, limit),
        p_below=bentkus.p_below(total, n, limit),
        cases_needed=bentkus_cases_needed(rate, limit, alpha),
        detectable=bentkus_detectable(n, limit, above=rate >= limit, alpha=alpha),
    )


def bentkus_cases_needed(rate: float, limit: float, alpha: float) -> int | None:
    """Cases at which a share sum at ``rate`` would decide Bentkus's test on its side."""
    if rate == limit:
        return None
    if rate > limit:
        return first_true(lambda m: bentkus.p_above(rate * m, m, limit) < alpha)
    return first_true(lambda m: bentkus.p_below(rate * m, m, limit) < alpha)


def bentkus_detectable(n: int, limit: float, *, above: bool, alpha: float) -> float | None:
    """The distance detected with 80 % power when the shares are all or nothing (the
    spread the test is built for)."""
    passing, failing = bentkus.critical_counts(n, limit, alpha)
    if above:
        return None if failing > n else power_distance(n, limit, failing, above=True)
    return None if passing < 0 else power_distance(n, limit, passing, above=False)


# --- betting mixture ------------------------------------------------------------------------


def _compressed(values: npt.NDArray[np.float64]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and their counts: shares of k pairs take few values, so the capital
    costs O(distinct values), not O(cases)."""
    distinct, counts = np.unique(values, return_counts=True)
    return distinct, counts.astype(np.float64)


def _log_factor_sums(
    distinct: np.ndarray, counts: np.ndarray, m: float, support: tuple[float, float], above: bool
) -> np.ndarray:
    """Per fraction cⱼ, Σᵢ log(1 ± λⱼ(xᵢ − m)) (−inf where a bet went bust)."""
    lo, hi = support
    lam = FRACTIONS / ((m - lo) if above else (hi - m))
    sign = 1.0 if above else -1.0
    factors = 1.0 + sign * np.outer(lam, distinct - m)
    with np.errstate(divide="ignore"):
        logs = np.log(np.maximum(factors, 0.0))
    sums: np.ndarray = np.where(counts > 0, logs * counts, 0.0).sum(axis=1)
    return sums


def _log_mixture(sums: np.ndarray) -> float:
    terms = _LOG_WEIGHTS + sums
    top = float(np.max(terms))
    if top == -math.inf:
        return -math.inf
    return top + math.log(float(np.exp(terms - top).sum()))


def log_capital(
    values: npt.ArrayLike, m: float, *, support: tuple[float, float] = (0.0, 1.0),
    above: bool = True,
) -> float:
    """log K(m): the mixture's log-capital against H0: mean ≤ m (``above``) or mean ≥ m."""
    distinct, counts = _compressed(np.asarray(values, dtype=np.float64))
    return _log_mixture(_log_factor_sums(distinct, counts, m, support, above))


def mean_test(
    values: Sequence[float] | npt.NDArray[np.float64],
    limit: float,
    *,
    support: tuple[float, float] = (0.0, 1.0),
    alpha: float = ALPHA,
    sizing: bool = True,
) -> MeanTest:
    """Betting tests of the mean of ``values`` (each in ``support``) against ``limit``; the
    cases needed and the detectable effect only with ``sizing``."""
    lo, hi = float(support[0]), float(support[1])
    support = (lo, hi)
    if not lo < limit < hi:
        raise ValueError(f"the limit must lie strictly inside the support {support}, got {limit}")
    x = np.asarray(values, dtype=np.float64)
    if x.size and (x.min() < lo or x.max() > hi or not np.isfinite(x).all()):
        raise ValueError(f"per-case values must lie in {support}")
    if x.size == 0:
        return MeanTest(BETTING, 0, limit, None, lo, hi, 1.0, 1.0, None, None)
    distinct, counts = _compressed(x)
    n = int(x.size)
    mean = min(max(math.fsum(x.tolist()) / n, lo), hi)
    threshold = math.log(1.0 / alpha)

    def log_k(m: float, above: bool) -> float:
        return _log_mixture(_log_factor_sums(distinct, counts, m, support, above))

    low = lo if log_k(lo + (hi - lo) * 1e-12, True) <= threshold else edge(
        lambda m: log_k(m, True) > threshold, mean, lo)
    high = hi if log_k(hi - (hi - lo) * 1e-12, False) <= threshold else edge(
        lambda m: log_k(m, False) > threshold, mean, hi)
    return MeanTest(
        method=BETTING,
        n=n,
        limit=limit,
        estimate=mean,
        low=low,
        high=high,
        p_above=min(1.0, math.exp(-log_k(limit, True))),
        p_below=min(1.0, math.exp(-log_k(limit, False))),
        cases_needed=(_betting_cases_needed(distinct, counts, mean, limit, support, threshold)
                      if sizing else None),
        detectable=_betting_detectable(x, mean, limit, support, threshold) if sizing else None,
    )


def cases_needed(
    values: Sequence[float] | npt.NDArray[np.float64],
    limit: float,
    *,
    support: tuple[float, float] = (0.0, 1.0),
    alpha: float = ALPHA,
) -> int | None:
    """``mean_test(...).cases_needed`` alone (at another level, e.g. Holm's α / m), without
    the bounds."""
    x = np.asarray(values, dtype=np.float64)
    if not x.size:
        return None
    distinct, counts = _compressed(x)
    mean = math.fsum(x.tolist()) / x.size
    return _betting_cases_needed(distinct, counts, mean, limit, support, math.log(1.0 / alpha))


def _betting_cases_needed(
    distinct: np.ndarray, counts: np.ndarray, mean: float, limit: float,
    support: tuple[float, float], threshold: float,
) -> int | None:
    if mean == limit:
        return None
    rates = _log_factor_sums(distinct, counts, limit, support, mean > limit) / counts.sum()
    if not np.any(rates > 0):
        return None
    return first_true(lambda m: _log_mixture(rates * m) > threshold)


def _betting_detectable(
    x: npt.NDArray[np.float64], mean: float, limit: float, support: tuple[float, float],
    threshold: float,
) -> float | None:
    lo, hi = support
    above = mean >= limit
    n = x.size
    centred = x - mean

    def powered(delta: float) -> bool:
        shifted = np.clip(centred + (limit + delta if above else limit - delta), lo, hi)
        lam = FRACTIONS / ((limit - lo) if above else (hi - limit))
        steps = 1.0 + (1.0 if above else -1.0) * np.outer(lam, shifted - limit)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(np.maximum(steps, 0.0))
            growth = logs.mean(axis=1)
            spread = logs.std(axis=1)
            score = n * growth - _Z_POWER * math.sqrt(n) * spread + _LOG_WEIGHTS
        return bool(np.nanmax(np.where(np.isfinite(score), score, -np.inf)) > threshold)

    room = (hi - limit) if above else (limit - lo)
    if not powered(room):
        return None
    return edge(powered, 0.0, room, tolerance=1e-5)  # a planning figure
