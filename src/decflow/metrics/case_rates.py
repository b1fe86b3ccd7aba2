"""Rates with the case as the sampling unit: per-case shares and their case-level test.

Several observations of one case (its rerun pairs, its option_order variants, its persona
pairs) share the case text and succeed or fail together, so counting them as independent
overstates the evidence. Each case contributes one number, its share of hits; the rate is the
mean of those shares, and its bounds and verdicts come from ``decflow.metrics.bounded_mean``.
With one observation per case by construction the shares are 0 or 1 and the exact binomial
test applies; otherwise the exact binomial test on the shares randomly rounded to 0/1
(``decflow.metrics.rounded_shares``: valid for every distribution of the shares, and exactly
the exact test when a case's observations flip all or nothing), with the uniforms of the
run's recorded rounding seed. A run stored without one (before randomized rounding) is
judged, re-gated and resumed as it was: Bentkus's bound on the shares' sum, the binomial
test's worst case over every distribution in [0, 1].
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from decflow.metrics import bentkus, rounded_shares
from decflow.metrics.binomial import lower_tail, upper_tail
from decflow.metrics.bounded_mean import bentkus_test, binomial_test
from decflow.metrics.evidence import ALPHA, MeanTest
from decflow.metrics.search import edge, first_true


class Thresholds(NamedTuple):
    """The sums at which a rate test on n cases decides: it fails exactly when the sum is
    above `fail_above`, and does not fail when it is below `fail_from`; it holds exactly when
    the sum is below `pass_below`, and does not hold when it is above `pass_to`. For shares
    the pairs are equal; for counts they are neighbouring whole numbers (fails from the
    count `fail_from`, holds up to the count `pass_to`)."""

    fail_above: float
    fail_from: float
    pass_to: float
    pass_below: float


def case_shares(
    case_codes: npt.NDArray[np.int64], hits: npt.NDArray[np.bool_], n_cases: int
) -> npt.NDArray[np.float64]:
    """Per case (codes 0 … n_cases − 1), its share of hits; NaN for a case with none."""
    counts = np.bincount(case_codes, minlength=n_cases).astype(np.float64)
    found = np.bincount(case_codes, weights=hits.astype(np.float64), minlength=n_cases)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, found / np.where(counts > 0, counts, 1.0), np.nan)


def shares_by_case(
    case_codes: npt.NDArray[np.int64], hits: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.float64], int]:
    """Per case code that has observations, its share of hits (in code order), and the most
    observations any case had."""
    if not case_codes.size:
        return np.zeros(0), 0
    counts = np.bincount(case_codes)
    found = np.bincount(case_codes, weights=hits.astype(np.float64))
    has = counts > 0
    return found[has] / counts[has], int(counts.max())


def rate_test(
    shares: npt.NDArray[np.float64], most_per_case: int, limit: float, *, alpha: float = ALPHA,
    uniforms: npt.NDArray[np.float64] | None = None,
) -> MeanTest:
    """The case-level test of a rate against ``limit`` in (0, 1): exact binomial when every
    case has one observation; otherwise exact binomial on the shares rounded with
    ``uniforms`` (one per share, `rounded_shares.uniforms`), or Bentkus's bound on the
    shares for a run recorded without a rounding seed (``uniforms`` None)."""
    if most_per_case <= 1:
        return binomial_test(round(float(shares.sum())), int(shares.size), limit,
                             alpha=alpha)
    if uniforms is not None:
        return rounded_shares.rounded_test(shares, uniforms, limit, alpha=alpha)
    return bentkus_test(shares, limit, alpha=alpha)


@lru_cache(maxsize=64)  # a sequential run asks at every batch; pure
def rate_thresholds(n: int, most_per_case: int, limit: float, *,
                    alpha: float = ALPHA, rounded: bool = False) -> Thresholds:
    """Where `rate_test` on n cases decides, as sums of its per-case values (counts when
    every case has one observation or the shares are `rounded`): it fails exactly when the
    sum is above `fail_above`, and holds exactly when it is below `pass_below` (the
    p-values fall as the sum grows and rise as n grows with the sum fixed). A sequential
    run settles the full run's verdict against these."""
    if most_per_case <= 1 or rounded:
        critical = (rounded_shares.critical_counts(n, limit, alpha) if rounded
                    else _binomial_counts(n, limit, alpha))
        return Thresholds(critical.fails_from - 1.0, float(critical.fails_from),
                          float(critical.passes_to), critical.passes_to + 1.0)
    fail_above = float(n) if bentkus.p_above(n, n, limit) >= alpha else edge(
        lambda s: bentkus.p_above(s, n, limit) < alpha, 0.0, float(n), tolerance=1e-9)
    pass_below = 0.0 if bentkus.p_below(0.0, n, limit) >= alpha else edge(
        lambda s: bentkus.p_below(s, n, limit) < alpha, float(n), 0.0, tolerance=1e-9)
    return Thresholds(fail_above, fail_above, pass_below, pass_below)


def _binomial_counts(n: int, limit: float, alpha: float) -> rounded_shares.CriticalCounts:
    failing = first_true(lambda c: upper_tail(c, n, limit) < alpha, start=0, stop=n + 1)
    not_passing = first_true(lambda c: lower_tail(c, n, limit) >= alpha, start=0, stop=n + 1)
    return rounded_shares.CriticalCounts((n + 1 if not_passing is None else not_passing) - 1,
                                         n + 1 if failing is None else failing)
