"""Calibration as the field now measures it: the binned ECE's noise floor, SmoothECE and the
CORP decomposition of the Brier score, for top-label confidence against correctness.

- **Noise floor of the binned ECE** (Roelofs et al. 2022, "Mitigating bias in calibration
  error estimation"): even a perfectly calibrated model shows a binned ECE well above 0 on a
  small suite — 0.11 / 0.08 / 0.06 / 0.04 median at 50 / 100 / 200 / 500 cases with
  confidences spread over [0.4, 1]. The floor is what a perfectly calibrated model would show
  at this n and these confidences: seeded resampling of the correct counts from the model's
  own confidences, per bin Binomial(count, mean confidence). The binomial of the bin's mean
  is exact when a bin's confidences are equal and otherwise dominates the true count in
  convex order (Hoeffding 1956), so the floor is, if anything, high. It uses only each bin's
  count and confidence sum, so partitions of production records merge exactly. A gate whose
  limit is below the floor's 95th percentile fails a perfectly calibrated model more than 5 %
  of the time: *noise-dominated*.
- **SmoothECE** (Błasiok & Nakkiran 2023): ``decflow.metrics.smooth_ece``.
- **CORP** (Dimitriadis, Gneiting & Jordan 2021, "Stable reliability diagrams for
  probabilistic classifiers", PNAS): the isotonic (pool-adjacent-violators) recalibration
  ĉ of the confidences gives Brier = MCB − DSC + UNC with MCB = B(c) − B(ĉ) (miscalibration),
  DSC = B(ȳ) − B(ĉ) (discrimination), UNC = B(ȳ) = ȳ(1 − ȳ); the isotonic curve is the CORP
  reliability diagram. For the top label, so B is the Brier score of confidence against
  correctness (the golden `brier` metric sums over all labels).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from decflow.metrics.smooth_ece import GridSource, smooth_ece

FLOOR_REPLICATES = 2000
FLOOR_SEED = 0

Floats = npt.NDArray[np.float64]


FLOOR_METHOD = ("labels resampled from the model's own confidences (per bin: Binomial of the "
                "bin's count and mean confidence)")


def _calibrated_eces(bins: Sequence[Mapping[str, Any]], rng: np.random.Generator,
                     replicates: int) -> Floats | None:
    """Binned ECEs of a perfectly calibrated model with these reliability bins (count and
    mean confidence per bin), one per replicate; None without cases."""
    count = np.array([int(b["count"]) for b in bins], dtype=np.int64)
    total = int(count.sum())
    if total == 0:
        return None
    mean = np.array([b["mean_confidence"] or 0.0 for b in bins], dtype=np.float64)
    correct = rng.binomial(count, np.clip(mean, 0.0, 1.0), size=(replicates, count.size))
    eces: Floats = np.abs(correct - count * mean).sum(axis=1) / total
    return eces


def _summary(values: Floats, replicates: int, seed: int) -> dict[str, Any]:
    return {"median": float(np.median(values)), "p95": float(np.quantile(values, 0.95)),
            "replicates": replicates, "seed": seed, "method": FLOOR_METHOD}


def noise_floor(
    bins: Sequence[Mapping[str, Any]], *, seed: int = FLOOR_SEED,
    replicates: int = FLOOR_REPLICATES,
) -> dict[str, Any] | None:
    """The binned ECE a perfectly calibrated model would show with these reliability bins:
    its median and 95th percentile over seeded replicates (None without cases)."""
    eces = _calibrated_eces(bins, np.random.default_rng(seed), replicates)
    return None if eces is None else _summary(eces, replicates, seed)


def increase_floor(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *,
    seed: int = FLOOR_SEED, replicates: int = FLOOR_REPLICATES,
) -> dict[str, Any] | None:
    """The ECE increase two perfectly calibrated runs with these bins would show (after −
    before, independent resamplings): a `max_ece_increase` limit below its 95th percentile
    is noise-dominated."""
    rng = np.random.default_rng(seed)
    first = _calibrated_eces(before, rng, replicates)
    second = _calibrated_eces(after, rng, replicates)
    if first is None or second is None:
        return None
    return _summary(second - first, replicates, seed)


def noise_dominated(limit: float, floor: dict[str, Any] | None) -> bool:
    """A max_ece limit below the floor's 95th percentile: a perfectly calibrated model fails
    it more than 5 % of the time."""
    return floor is not None and limit < floor["p95"]


def _isotonic(x: Floats, y: Floats) -> Floats:
    """Pool-adjacent-violators fit of y on x (non-decreasing in x; equal x pooled first)."""
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.concatenate([[True], xs[1:] != xs[:-1]]))
    sums = np.add.reduceat(ys, starts) if ys.size else ys
    weights = np.diff(np.append(starts, ys.size)).astype(np.float64)
    block_sum: list[float] = []
    block_weight: list[float] = []
    block_size: list[int] = []
    for total, weight in zip(sums.tolist(), weights.tolist(), strict=True):
        block_sum.append(total)
        block_weight.append(weight)
        block_size.append(1)
        while len(block_sum) > 1 and (
            block_sum[-2] / block_weight[-2] > block_sum[-1] / block_weight[-1]
        ):
            merged_sum, merged_weight = block_sum.pop(), block_weight.pop()
            merged_size = block_size.pop()
            block_sum[-1] += merged_sum
            block_weight[-1] += merged_weight
            block_size[-1] += merged_size
    level_of_group = np.repeat([s / w for s, w in zip(block_sum, block_weight, strict=True)],
                               block_size)
    fitted = np.empty_like(ys)
    fitted[order] = np.repeat(level_of_group, weights.astype(np.int64))
    return fitted


def corp(confidence: npt.ArrayLike, correct: npt.ArrayLike, *,
         curve_points: int = 50) -> dict[str, Any] | None:
    """CORP decomposition of the top-label Brier score and its isotonic reliability curve."""
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if c.size == 0:
        return None
    recalibrated = _isotonic(c, y)
    base = math.fsum(y.tolist()) / y.size

    def brier(p: Floats) -> float:
        return math.fsum(((p - y) ** 2).tolist()) / y.size

    score, fitted = brier(c), brier(recalibrated)
    order = np.argsort(c, kind="stable")
    steps = np.unique(np.linspace(0, c.size - 1, min(curve_points, c.size)).astype(np.int64))
    return {
        "brier": score,
        "miscalibration": score - fitted,
        "discrimination": base * (1 - base) - fitted,
        "uncertainty": base * (1 - base),
        "curve": [{"confidence": float(c[order[i]]), "accuracy": float(recalibrated[order[i]])}
                  for i in steps.tolist()],
    }


def calibration_section(
    reliability: Sequence[Mapping[str, Any]], ece: float | None, source: GridSource, *,
    max_ece: Mapping[str, float], corp_of: tuple[Floats, Floats] | None = None,
) -> dict[str, Any]:
    """The report's `calibration` section beside DecGuard's `metrics.calibration`: the
    binned ECE with its noise floor (and which `max_ece` limits it makes noise-dominated,
    by level), SmoothECE with its reliability curve, and CORP when the records are at hand
    (``corp_of`` = confidences, correctness)."""
    floor = noise_floor(reliability)
    n = sum(int(b["count"]) for b in reliability)
    gates = [
        {"gate": "max_ece", "level": level, "limit": limit,
         "noise_dominated": noise_dominated(limit, floor)}
        for level, limit in max_ece.items()
    ]
    return {
        "n": n,
        "binned_ece": {"value": ece, "noise_floor": floor, "gates": gates},
        "smooth_ece": smooth_ece(source).to_dict() if n else None,
        "corp": None if corp_of is None else corp(*corp_of),
    }


def diff_calibration(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]],
    ece: tuple[float | None, float | None], max_ece_increase: Mapping[str, float],
) -> dict[str, Any]:
    """The diff report's `calibration` section: each run's binned ECE with its noise floor,
    the floor of the increase, and the `max_ece_increase` limits it makes noise-dominated."""
    floor = increase_floor(before, after)
    return {
        "baseline": {"ece": ece[0], "noise_floor": noise_floor(before)},
        "candidate": {"ece": ece[1], "noise_floor": noise_floor(after)},
        "increase_noise_floor": floor,
        "gates": [{"gate": "max_ece_increase", "level": level, "limit": limit,
                   "noise_dominated": noise_dominated(limit, floor)}
                  for level, limit in max_ece_increase.items()],
    }
