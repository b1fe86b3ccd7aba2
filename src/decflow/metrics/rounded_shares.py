"""Randomized rounding: the exact binomial test for per-case shares in [0, 1].

Each case's share sᵢ (of flipped rerun pairs, of violating variants, of flipped persona
pairs without a placebo) is rounded to Xᵢ = 1{Uᵢ < sᵢ} with a uniform Uᵢ drawn independently
of the answers. Given the shares, the Xᵢ are independent Bernoulli(sᵢ), so:

- cases drawn i.i.d. (the model's rate is the mean share μ): the Xᵢ are i.i.d.
  Bernoulli(μ) exactly, and the exact binomial test and Clopper–Pearson bounds on ΣXᵢ keep
  their error rates for every distribution of the shares;
- cases held fixed, each with its own mean share μᵢ: ΣXᵢ is Poisson-binomial with mean nμ̄,
  and Hoeffding (1956, "On the distribution of the number of successes in independent
  trials", Ann. Math. Statist. 27, Theorem 4) bounds its tails by Binomial(n, μ̄)'s beyond
  one of the mean: P(S ≥ c) ≤ P(B ≥ c) for c ≥ nμ̄ + 1, P(S ≤ c) ≤ P(B ≤ c) for c ≤ nμ̄ − 1.
  Closer to the mean the p-value here is Markov's bound (nm / c above, n(1 − m) / (n − c)
  below), valid for any independent values; at α = 0.05 it changes a verdict only where a
  single rounded case would fail a limit m with n·m below 0.0513 (docs/statistics.md).

With all-or-nothing shares Xᵢ = sᵢ: the test is the exact binomial test on cases (1.0× its
cases needed). The price is a randomized verdict: the same answers can land either side of a
decision boundary under two seeds. The seed is drawn per run (`secrets`,
`RunSpec.rounding_seed`), never by whoever writes the dataset, and recorded with the run, so
re-gating and `--resume` replay the verdict. Uᵢ is keyed BLAKE2b of (gate, case id) under
the seed (a pseudo-random function: distinct case ids give independent uniforms whatever ids
the dataset chose), on a 2⁻⁵³ grid (P(Xᵢ = 1) is sᵢ to within 2⁻⁵³).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from decflow.metrics.binomial import lower_tail, upper_tail
from decflow.metrics.bounded_mean import (
    binomial_cases_needed,
    check_shares,
    power_distance,
)
from decflow.metrics.evidence import ALPHA, MeanTest
from decflow.metrics.search import first_true, lower_edge, upper_edge

Floats = npt.NDArray[np.float64]

ROUNDED = "exact binomial on randomly rounded shares (Clopper-Pearson), case as unit"
ROUNDED_NOTE = "shares randomly rounded to 0/1 with the run's rounding_seed"
"""What a verdict's text adds when its bounds are the rounded count's."""
_TOLERANCE = 1e-10


def uniforms(seed: int, gate: str, case_ids: Iterable[str]) -> Floats:
    """Per case id, its uniform Uᵢ in [0, 1) for `gate` under the run's `seed`."""
    # keyed BLAKE2b of "gate\x1fcase": the key and the gate hashed once, each case's
    # digest continued from a copy of that state (the same digest, a third less CPU)
    keyed = hashlib.blake2b(f"{gate}\x1f".encode("utf-8", "surrogatepass"),
                            key=seed.to_bytes(8, "big"), digest_size=8)
    words = []
    for case in case_ids:
        digest = keyed.copy()
        digest.update(case.encode("utf-8", "surrogatepass"))
        words.append(int.from_bytes(digest.digest(), "big") >> 11)
    return np.asarray(words, dtype=np.float64) * 2.0**-53


def rounded_count(shares: Floats, uniforms_: Floats) -> int:
    """ΣXᵢ: the cases whose uniform falls below their share."""
    return int(np.count_nonzero(uniforms_ < shares))


def p_above(count: int, n: int, m: float) -> float:
    """p-value of H0: mean share ≤ m from `count` rounded ones of n cases."""
    if count <= 0:
        return 1.0
    if count >= n * m + 1.0:
        return upper_tail(count, n, m)
    return min(1.0, n * m / count)


def p_below(count: int, n: int, m: float) -> float:
    """p-value of H0: mean share ≥ m from `count` rounded ones of n cases."""
    if count >= n:
        return 1.0
    if count <= n * m - 1.0:
        return lower_tail(count, n, m)
    return min(1.0, n * (1.0 - m) / (n - count))


def lower_bound(count: int, n: int, alpha: float) -> float:
    """The one-sided (1 − α) lower bound: where p_above (increasing in m) crosses α."""
    return lower_edge(lambda m: p_above(count, n, m), count, n, alpha, _TOLERANCE)


def upper_bound(count: int, n: int, alpha: float) -> float:
    """The one-sided (1 − α) upper bound: where p_below (decreasing in m) crosses α."""
    return upper_edge(lambda m: p_below(count, n, m), count, n, alpha, _TOLERANCE)


class CriticalCounts(NamedTuple):
    """Where the test on n cases decides: it holds (mean below the limit) with at most
    `passes_to` rounded ones (−1: never) and fails with at least `fails_from` (n + 1:
    never)."""

    passes_to: int
    fails_from: int


def critical_counts(n: int, limit: float, alpha: float = ALPHA) -> CriticalCounts:
    """The counts at which the test decides (both p-values are monotone in the count)."""
    failing = first_true(lambda c: p_above(c, n, limit) < alpha, start=0, stop=n + 1)
    not_passing = first_true(lambda c: p_below(c, n, limit) >= alpha, start=0, stop=n + 1)
    return CriticalCounts((n + 1 if not_passing is None else not_passing) - 1,
                          n + 1 if failing is None else failing)


def rounded_test(shares: Floats, uniforms_: Floats, limit: float, *,
                 alpha: float = ALPHA) -> MeanTest:
    """Tests of the mean share against ``limit`` in (0, 1) on the shares rounded with
    `uniforms_` (one per share); the estimate is the mean share itself, the bounds and
    p-values the rounded count's."""
    x = check_shares(shares, limit)
    if x.shape != np.shape(uniforms_):
        raise ValueError("rounding needs one uniform per share")
    n = int(x.size)
    if n == 0:
        return MeanTest(ROUNDED, 0, limit, None, 0.0, 1.0, 1.0, 1.0, None, None)
    count = rounded_count(x, uniforms_)
    rate = min(max(math.fsum(x.tolist()) / n, 0.0), 1.0)
    critical = critical_counts(n, limit, alpha)
    if rate >= limit:
        detectable = (None if critical.fails_from > n else
                      power_distance(n, limit, critical.fails_from, above=True))
    else:
        detectable = (None if critical.passes_to < 0 else
                      power_distance(n, limit, critical.passes_to, above=False))
    return MeanTest(
        method=ROUNDED,
        n=n,
        limit=limit,
        estimate=rate,
        low=lower_bound(count, n, alpha),
        high=upper_bound(count, n, alpha),
        p_above=p_above(count, n, limit),
        p_below=p_below(count, n, limit),
        cases_needed=binomial_cases_needed(rate, limit, alpha),
        detectable=detectable,
    )
