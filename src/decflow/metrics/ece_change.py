"""The change of the binned ECE between two runs on the same cases, with bounds that allow
for the binned ECE's bias (`max_ece_increase` in evidence-gated diffs).

The binned ECE of a run is Σ_b |Σ_{i∈b} (yᵢ − cᵢ)| / n over its confidence bins (yᵢ the case
answered right, cᵢ its confidence). Given the confidences, its target is the same sum with
each yᵢ replaced by the case's chance pᵢ of being right (the run's calibration at these
confidences, the SmoothECE gate's convention), and by the triangle inequality

    |ECE − ECE_target| ≤ Σ_b |Σ_{i∈b} (yᵢ − pᵢ)| / n,

the L1 norm of the answers' noise. That noise makes the binned ECE biased upward, most for a
well-calibrated run (every |·| of pure noise is positive): the difference of two runs'
ECEs is biased *down* when the candidate is the worse calibrated one — the percentile
bootstrap this replaces kept that bias (a true increase of 0.06 against a limit of 0.05
passed in 27–36 % of diffs at 100–1,000 cases).

Here each run's noise norm gets its (1 − α/2) quantile q under the largest variance a 0/1
answer can have, ¼ (a Gaussian per bin with variance n_b/4, `REPLICATES` seeded draws): the
noise of any accuracies is no larger in the Gaussian limit (Anderson's theorem: a
covariance that is smaller in the positive semi-definite order gives a stochastically
smaller norm), whatever answers were right. With probability ≥ 1 − α both runs' targets
lie within their q of the estimates (a union bound, so the two runs may be dependent — they
are: the same cases), and the increase lies in

    [max(0, ECE_after − q_after) − (ECE_before + q_before),
     (ECE_after + q_after) − max(0, ECE_before − q_before)],

clipped to [−1, 1]. The clip at 0 is where the bias is removed: a calibrated run's ECE is
no larger than its noise, and its target is not shown above 0. FAIL when the lower end is
above the limit, PASS when the upper end is below it; the p-values are the smallest α at
which each end clears the limit. What is left approximate is the normal limit of each
bin's sum of 0/1 answers (few cases in a bin); the error rates are measured
(docs/statistics.md).

The price of the guarantee is power: q shrinks like √(bins / n), about 0.05 a run at 1,000
cases and 10 bins, so an increase near a limit of 0.05 is not established until several
thousand cases (the cases needed say how many).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from decflow.metrics.evidence import ALPHA, MeanTest
from decflow.metrics.golden_metrics import calibration_bin_index
from decflow.metrics.search import edge

REPLICATES = 4000
SEED = 20_261_206
METHOD = ("binned ECE change: each run's ECE within its noise's L1 bound at the largest 0/1 "
          "variance (alpha/2 a run), the better calibrated run not shown above 0")
_Z_POWER = 0.8416212335729143  # the standard normal quantile at 80 % power


def _bins(confidence: npt.NDArray[np.float64], correct: npt.NDArray[np.bool_],
          n_bins: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(cases per bin, Σ (right − confidence) per bin)."""
    index = calibration_bin_index(confidence, n_bins)
    counts = np.bincount(index, minlength=n_bins).astype(np.float64)
    gaps = np.bincount(index, weights=correct.astype(np.float64) - confidence,
                       minlength=n_bins).astype(np.float64)
    return counts, gaps


def noise_norms(counts: npt.NDArray[np.float64], *, seed: int = SEED,
                replicates: int = REPLICATES) -> npt.NDArray[np.float64]:
    """Sorted draws of the noise's L1 norm Σ_b |G_b| / n, G_b ~ N(0, n_b / 4)."""
    rng = np.random.default_rng(seed)
    draws = rng.standard_normal((replicates, counts.size)) * np.sqrt(counts / 4.0)
    return np.sort(np.abs(draws).sum(axis=1) / counts.sum())


def _quantile(norms: npt.NDArray[np.float64], level: float) -> float:
    return float(np.quantile(norms, min(max(level, 0.0), 1.0)))


def ece_change_test(confidence_before: npt.NDArray[np.float64],
                    correct_before: npt.NDArray[np.bool_],
                    confidence_after: npt.NDArray[np.float64],
                    correct_after: npt.NDArray[np.bool_], n_bins: int, limit: float, *,
                    alpha: float = ALPHA) -> MeanTest:
    """ECE(after) − ECE(before) on the same labeled cases against `limit` (see the module
    docstring)."""
    n = int(correct_before.size)
    if n == 0:
        return MeanTest(METHOD, 0, limit, None, -1.0, 1.0, 1.0, 1.0, None, None)
    counts_b, gaps_b = _bins(confidence_before, correct_before, n_bins)
    counts_a, gaps_a = _bins(confidence_after, correct_after, n_bins)
    ece_b, ece_a = float(np.abs(gaps_b).sum()) / n, float(np.abs(gaps_a).sum()) / n
    norms_b, norms_a = noise_norms(counts_b), noise_norms(counts_a)

    def bounds(level: float) -> tuple[float, float]:
        q_b, q_a = _quantile(norms_b, 1 - level / 2), _quantile(norms_a, 1 - level / 2)
        low = max(0.0, ece_a - q_a) - (ece_b + q_b)
        high = ece_a + q_a - max(0.0, ece_b - q_b)
        return max(low, -1.0), min(high, 1.0)

    low, high = bounds(alpha)

    def p_value(clears: Callable[[float], bool]) -> float:
        """The smallest level at which the end clears the limit (the bounds only narrow as
        the level grows); 1 when not even the medians clear it."""
        if not clears(1.0):
            return 1.0
        return edge(lambda level: clears(level), 1e-12, 1.0, tolerance=1e-7)

    estimate = ece_a - ece_b
    p_above = p_value(lambda level: bounds(level)[0] > limit)
    p_below = p_value(lambda level: bounds(level)[1] < limit)
    margin = _quantile(norms_a, 1 - alpha / 2) + _quantile(norms_b, 1 - alpha / 2)
    spread = float(np.std(norms_a) + np.std(norms_b))
    gap = abs(estimate - limit)
    decided = low > limit or high < limit
    # The margin shrinks like 1/√n: the cases at which it would clear the gap (planning).
    needed = None if decided or gap == 0.0 else max(n + 1, math.ceil(n * (margin / gap) ** 2))
    return MeanTest(METHOD, n, limit, estimate, low, high, p_above, p_below, needed,
                    margin + _Z_POWER * spread)
