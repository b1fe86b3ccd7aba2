"""Tests of the mean of per-case differences in [−1, 1] (a persona axis's excess of cross over
placebo flips), both sides valid at every n for any distribution of the differences.

- **Above the limit** (unfair): the betting test of ``decflow.metrics.bounded_mean`` on the
  differences. A case at −1 (every placebo pair flipped, no cross pair) is possible, so no
  valid test can call a handful of cases unfair unless their excess is large; the betting
  mixture's all-in bet is the one that gets there first.
- **Below the limit** (fair): the mean of the differences is at most the mean of their
  positive parts d⁺ = max(d, 0), values in [0, 1]; Bentkus's bound on d⁺ (the exact binomial
  test's worst case) shows it below the limit after as few quiet cases as the exact "0 of
  n" bound allows, and tolerates the odd case whose cross pairs flipped where the betting
  test on d gives up (one case of 200 with d = 1 already keeps it from a fair verdict at a
  limit of 0.05). A noisy model whose cross and placebo shares both move has a positive
  part well above its mean; there the betting test on d is the one that can decide. So the
  fair side takes both, by a weighted Bonferroni split fixed in advance: Bentkus on d⁺ at
  0.8·α, betting on d at 0.2·α (p = min(p₊ / 0.8, p_bet / 0.2); the upper bound is the
  smaller of the two bounds at those levels).

Which test applies is fixed by what the values are (differences in [−1, 1]), never by the
values seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from decflow.metrics import bentkus
from decflow.metrics.bounded_mean import (
    bentkus_cases_needed,
    bentkus_detectable,
    cases_needed,
    log_capital,
    mean_test,
)
from decflow.metrics.evidence import ALPHA, MeanTest

N = TypeVar("N", int, float)

DIFFERENCE_RANGE = (-1.0, 1.0)
POSITIVE_SHARE = 0.8
"""The fair side's share of α spent on Bentkus's bound on the positive parts; the rest goes
to the betting test on the differences."""
METHOD = ("betting (WSR mixture) on the case differences; below the limit also Bentkus on "
          "their positive parts (0.8/0.2 of alpha), case as unit")


def p_below(values: Sequence[float] | npt.NDArray[np.float64], limit: float) -> float:
    """The fair side's p-value alone (no bounds, no sizing): min(p₊ / 0.8, p_bet / 0.2)."""
    d = np.asarray(values, dtype=np.float64)
    if not d.size:
        return 1.0
    log_k = log_capital(d, limit, support=DIFFERENCE_RANGE, above=False)
    p = min(1.0, math.exp(-log_k) / (1 - POSITIVE_SHARE))
    if 0.0 < limit < 1.0:
        p = min(p, bentkus.p_below(math.fsum(np.maximum(d, 0.0).tolist()), int(d.size), limit)
                / POSITIVE_SHARE)
    return p


def difference_test(values: Sequence[float] | npt.NDArray[np.float64], limit: float, *,
                    alpha: float = ALPHA) -> MeanTest:
    """Both one-sided tests of the mean of ``values`` (each in [−1, 1]) against ``limit``
    (see the module docstring); ``cases_needed`` and ``detectable`` on the side the
    estimate lies, from whichever test decides it sooner."""
    d = np.asarray(values, dtype=np.float64)
    mean = float(d.mean()) if d.size else None
    fair_side = mean is not None and mean < limit
    above = mean_test(d, limit, support=DIFFERENCE_RANGE, alpha=alpha, sizing=not fair_side)
    if not d.size:
        return above
    betting = mean_test(d, limit, support=DIFFERENCE_RANGE, alpha=(1 - POSITIVE_SHARE) * alpha,
                        sizing=fair_side)
    high, needed, detectable = betting.high, betting.cases_needed, betting.detectable
    if 0.0 < limit < 1.0:  # a limit of 0: no mean of values ≥ 0 lies below it
        level = POSITIVE_SHARE * alpha
        positive = math.fsum(np.maximum(d, 0.0).tolist())
        high = _smaller(high, bentkus.upper_bound(positive, int(d.size), level))
        if fair_side and positive / d.size < limit:  # else the positive parts never show it
            needed = _smaller(needed, bentkus_cases_needed(positive / d.size, limit, level))
            detectable = _smaller(detectable, bentkus_detectable(int(d.size), limit,
                                                                 above=False, alpha=level))
    if not fair_side:
        needed, detectable = above.cases_needed, above.detectable
    return MeanTest(METHOD, above.n, limit, above.estimate, above.low, high, above.p_above,
                    p_below(d, limit), needed, detectable)


def difference_cases_needed(values: Sequence[float] | npt.NDArray[np.float64], limit: float,
                            *, alpha: float) -> int | None:
    """The cases that would decide the side the mean lies on at another level (Holm's
    α / axes above the limit), without the bounds."""
    d = np.asarray(values, dtype=np.float64)
    if not d.size:
        return None
    if float(d.mean()) >= limit:
        return cases_needed(d, limit, support=DIFFERENCE_RANGE, alpha=alpha)
    betting = cases_needed(d, limit, support=DIFFERENCE_RANGE,
                           alpha=(1 - POSITIVE_SHARE) * alpha)
    if not 0.0 < limit < 1.0:
        return betting
    rate = float(np.maximum(d, 0.0).mean())
    if rate >= limit:  # the positive parts alone never show it below
        return betting
    return _smaller(betting, bentkus_cases_needed(rate, limit, POSITIVE_SHARE * alpha))


def _smaller(a: N | None, b: N | None) -> N | None:
    return b if a is None else a if b is None else min(a, b)
