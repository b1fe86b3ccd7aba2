"""Rates with the case as the sampling unit: per-case shares and their case-level test.

Several observations of one case (its rerun pairs, its option_order variants, its persona
pairs) share the case text and succeed or fail together, so counting them as independent
overstates the evidence. Each case contributes one number, its share of hits; the rate is the
mean of those shares, and its bounds and verdicts come from ``decflow.metrics.bounded_mean``.
With one observation per case by construction the shares are 0 or 1 and the exact binomial
test applies; otherwise Bentkus's bound on the shares' sum, the binomial test's worst case
over every distribution in [0, 1]: within a small factor of the exact test when a case's
observations flip all or nothing (the clustering the case-level test exists for), and
exactly it when nothing flips.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decflow.metrics.bounded_mean import bentkus_test, binomial_test
from decflow.metrics.evidence import ALPHA, MeanTest


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
    shares: npt.NDArray[np.float64], most_per_case: int, limit: float, *, alpha: float = ALPHA
) -> MeanTest:
    """The case-level test of a rate against ``limit`` in (0, 1): exact binomial when every
    case has one observation, Bentkus's bound on the shares otherwise."""
    if most_per_case <= 1:
        return binomial_test(round(float(shares.sum())), int(shares.size), limit,
                             alpha=alpha)
    return bentkus_test(shares, limit, alpha=alpha)
