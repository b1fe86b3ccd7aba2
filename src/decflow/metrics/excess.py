"""The persona-flip evidence: the excess of cross-group over placebo flips, clustered by case.

Every case contributes one number, its *excess* dᵢ = (share of its cross-group pairs that
flipped) − (share of its placebo pairs that flipped); without a placebo dᵢ is the cross
share alone (*unattributed*). Pairs of one case share the case text, so they are not
independent: treating the case as the unit of sampling is what makes the interval respect
that clustering (the mean of case means with its between-case standard error is the
cluster-robust estimator for equal case weights, with n − 1 degrees of freedom).

Why a t interval on case means, and why its standard error has a floor
--------------------------------------------------------------------
- Under *no group effect* a cross swap and a placebo swap are exchangeable, so E[dᵢ] = 0 at
  any noise level; the question "is the excess above ``limit``?" is then a one-sided test of
  a mean, H0: E[d] ≤ limit, for which Student's t on the case means is the textbook choice
  and needs no resampling (reports reproduce exactly; a bootstrap would need a fixed seed
  and is anti-conservative with few cases).
- A sample standard deviation of 0 (no case flipped, or every case alike) would make that
  interval a single point: 30 quiet cases would "prove" a 5 % limit although a bias that
  hits 5 % of cases all-or-nothing leaves all 30 quiet with probability 0.95³⁰ ≈ 0.21. So
  the variance used is max(s², limit·(1 − limit)): the variance of a case-level excess that
  is 1 in a share ``limit`` of cases and 0 elsewhere — the largest a non-negative excess with
  mean ``limit`` can have. Rare flips that the sample happened to miss can then never
  narrow the interval below what the number of cases supports; with no flip at all a fair
  verdict at limit 0.05 needs about 54 cases, close to the exact all-or-nothing bound
  (ln 0.05 / ln 0.95 ≈ 59). The floor uses the limit, so the interval is the one for
  judging against that limit (re-gating with another limit recomputes it).
- The upper bound — the one a fair verdict reads — adds that all-or-nothing variance to the
  observed one instead of taking the larger: a bias concentrated in a share ``limit`` of
  cases that the sample happened to miss adds that much variance to whatever noise was
  seen, and case excesses of that kind are skewed to the right, which makes the lower tail
  of a t interval optimistic. With the larger of the two on both sides, a fair verdict
  at an excess exactly at the limit came out in 6.5 % of 400 simulated verdicts when the
  excess was concentrated in whole cases (nominal 5 %); with the sum, 3.25 %. The lower
  bound keeps the larger of the two: it is the side whose errors the skew makes rarer, and
  the sum would cost the power to find a real excess.
- Both bounds are one-sided 95 % statements (together a 90 % interval): the lower bound is
  above the limit exactly when the one-sided p-value is below 0.05, and a fair verdict
  (upper bound below the limit) is wrong at most 5 % of the time.

The sizes of the resulting verdicts under no group effect and at the limit, and the power
against a planted excess, are measured by simulation
(``tests/unit/test_counterfactual_simulation.py``, figures in ``docs/statistics.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from decflow.metrics.stats import student_t_quantile, student_t_sf

ALPHA = 0.05
MIN_CASES = 10  # fewer clusters than this: no verdict, whatever the data say
_MAX_CASES_SEARCHED = 1_000_000


@dataclass(frozen=True)
class ExcessEstimate:
    cases: int  # clusters that carried evidence
    excess: float | None  # mean of the case excesses
    sd: float | None  # sample standard deviation of the case excesses (n − 1)
    se: float | None  # lower bound and p-value: √(max(sd², limit(1 − limit)) / n)
    se_upper: float | None  # upper bound: √((sd² + limit(1 − limit)) / n)
    ci_low: float | None  # one-sided 95 % lower bound
    ci_high: float | None  # one-sided 95 % upper bound
    p_value: float | None  # one-sided, H0: excess ≤ limit
    limit: float
    enough_cases: bool  # cases ≥ MIN_CASES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def variance_floor(limit: float) -> float:
    """limit·(1 − limit): the variance of an all-or-nothing case excess with mean ``limit``."""
    return limit * (1.0 - limit)


def case_shares(case_codes: np.ndarray, flipped: np.ndarray, n_cases: int) -> np.ndarray:
    """Per case (codes 0 … n_cases − 1), the share of its pairs that flipped; NaN without pairs."""
    pairs = np.bincount(case_codes, minlength=n_cases).astype(float)
    flips = np.bincount(case_codes, weights=flipped.astype(float), minlength=n_cases)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, flips / np.where(pairs > 0, pairs, 1.0), np.nan)


def excess_test(
    differences: Sequence[float] | np.ndarray,
    limit: float,
    *,
    alpha: float = ALPHA,
    min_cases: int = MIN_CASES,
) -> ExcessEstimate:
    """Clustered estimate, one-sided bounds and p-value for H0: E[d] ≤ ``limit``.

    ``differences`` holds one excess per case. With fewer than two cases there is no
    standard error and nothing is estimated beyond the mean.
    """
    if not 0.0 < limit < 1.0:
        raise ValueError(f"the limit must be in (0, 1), got {limit}")
    d = np.asarray(differences, dtype=float)
    n = int(d.size)
    if n == 0:
        return ExcessEstimate(0, None, None, None, None, None, None, None, limit, False)
    mean = math.fsum(d.tolist()) / n
    if n < 2:
        return ExcessEstimate(n, mean, None, None, None, None, None, None, limit, False)
    sd = float(np.std(d, ddof=1))
    se = math.sqrt(max(sd * sd, variance_floor(limit)) / n)
    se_upper = math.sqrt((sd * sd + variance_floor(limit)) / n)
    t = student_t_quantile(1.0 - alpha, n - 1)
    p_value = student_t_sf((mean - limit) / se, n - 1)
    return ExcessEstimate(
        cases=n,
        excess=mean,
        sd=sd,
        se=se,
        se_upper=se_upper,
        ci_low=mean - t * se,
        ci_high=mean + t * se_upper,
        p_value=p_value,
        limit=limit,
        enough_cases=n >= min_cases,
    )


def cases_to_decide(
    estimate: ExcessEstimate,
    *,
    alpha_fair: float = ALPHA,
    alpha_unfair: float = ALPHA,
    min_cases: int = MIN_CASES,
) -> int | None:
    """Cases at which the verdict would be decided if the mean and spread stayed as observed.

    Below the limit: the upper bound at level ``alpha_fair`` falls under it; above: the lower
    bound at ``alpha_unfair`` (pass α / axes for a Holm family) clears it. None when the
    excess sits at the limit or could not be estimated.
    """
    if estimate.excess is None:
        return None
    gap = abs(estimate.excess - estimate.limit)
    if gap == 0.0:
        return None
    below = estimate.excess < estimate.limit
    alpha = alpha_fair if below else alpha_unfair
    variance, floor = (estimate.sd or 0.0) ** 2, variance_floor(estimate.limit)
    spread = math.sqrt(variance + floor if below else max(variance, floor))
    # The normal quantile gives a lower start; t is wider, so step up from there.
    z = NormalDist().inv_cdf(1.0 - alpha)
    n = max(min_cases, 2, math.ceil((z * spread / gap) ** 2))
    while n <= _MAX_CASES_SEARCHED:
        if student_t_quantile(1.0 - alpha, n - 1) * spread / math.sqrt(n) < gap:
            return n
        n += 1 if n < 1000 else n // 1000
    return None
