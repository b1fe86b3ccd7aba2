"""Drift and calibration distances judged against their sampling noise (the noise floor).

A distance between two samples is never zero, even when nothing changed: two samples of the
same confidence histogram differ by chance, more so when they are small. These tests put a
band around the observed distance that holds whatever the true distributions are, up to the
plug-in of the noise's distribution, and give tri-state verdicts from it
(docs/statistics.md, "Evidence-gated production gates"):

- **confidence TV distance** (`tv_test`). T = ½ Σ_k |p̂_k − b̂_k| over the histogram's bins.
  By the triangle inequality |T − TV(P, B)| ≤ ½ ‖(p̂ − p) − (b̂ − b)‖₁, the TV distance of the
  sampling noise alone; its distribution is that of two samples of sizes n (the window) and
  m (the baseline) drawn from the baseline's own histogram — the noise floor, simulated by
  `RESAMPLES` seeded multinomial draws. Shown above the limit: T minus the noise's
  (1 − α/2) quantile above it, or the same with the largest difference of the cumulative
  histograms (a lower bound on TV with much less noise: a sup over K − 1 sets, not 2^K; for a
  shift that moves confidences one way the two are equal), each at α/2. Shown below: T plus
  the noise's (1 − α) quantile below the limit.
- **binned ECE** (`ece_test`, `max_ece`) and **ECE increase** (`ece_increase_test`). Given the
  confidences, |ECE − ECE_true| ≤ Σ_b |k_b − n_b ā_b| / n (k_b correct of n_b in bin b, ā_b
  their mean true accuracy); that noise is simulated with binomial counts at each bin's
  accuracy (Laplace-smoothed, (k_b + 1)/(n_b + 2)): the binomial has at least the variance
  of the true (Poisson-binomial) count. The increase adds the two sides' noises.

p-values are the simulated exceedance shares (1 + #{noise ≥ x}) / (R + 1); the bounds are
read off the same sorted draws, so a bound clears the limit exactly when its p-value is
below α. The draws are seeded (`SEED`), so a stored report re-derives the same verdicts.
*Cases needed* and *detectable* are planning figures from the noise's 1/√n scaling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from decflow.metrics.evidence import ALPHA, MeanTest

RESAMPLES = 1999
LARGER_BASELINE = "a larger baseline would decide it"
SEED = 0
_Z_POWER = 0.8416212335729143  # the standard normal quantile at 80 % power
TV_METHOD = "noise floor: TV and cumulative distance against {r} resamplings of the baseline"
ECE_METHOD = "noise floor: binned ECE against {r} binomial resamplings of its bins"


def _p_exceed(sorted_noise: np.ndarray, x: float) -> float:
    """(1 + #{noise ≥ x}) / (R + 1): the chance the noise alone reaches x."""
    above = sorted_noise.size - int(np.searchsorted(sorted_noise, x, side="left"))
    return (1.0 + above) / (sorted_noise.size + 1.0)


def _critical(sorted_noise: np.ndarray, beta: float) -> float:
    """The smallest noise value c with `_p_exceed(noise, x) < β` for every x > c: an excess
    above c is shown at level β (inf when β is too small for R draws)."""
    allowed = math.ceil(beta * (sorted_noise.size + 1.0) - 1.0) - 1  # most draws ≥ x allowed
    if allowed < 0:
        return math.inf
    return float(sorted_noise[sorted_noise.size - 1 - allowed])


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@dataclass(frozen=True)
class _Band:
    """A distance, its noise draws (sorted) and what they give against one limit."""

    estimate: float
    noise: np.ndarray

    def p_above(self, limit: float) -> float:
        return _p_exceed(self.noise, self.estimate - limit) if self.estimate > limit else 1.0

    def p_below(self, limit: float) -> float:
        return _p_exceed(self.noise, limit - self.estimate) if self.estimate < limit else 1.0


def _needed(gap: float, critical: float, n: float, fixed: float) -> int | None:
    """The n′ at which a noise quantile scaling as √(1/n′ + fixed) falls below `gap`
    (None when even n′ = ∞ leaves it above, `fixed` being the other side's 1/m)."""
    if gap <= 0.0 or not math.isfinite(critical):
        return None
    if critical <= 0.0:
        return int(n)
    room = (gap / critical) ** 2 * (1.0 / n + fixed) - fixed
    return None if room <= 0.0 else max(1, math.ceil(1.0 / room))


def larger_baseline(rows: int) -> str:
    """The note of a drift gate that no window size can decide: the baseline's own noise
    (its `rows`) alone exceeds the distance between the estimate and the limit."""
    return (f"the baseline's own noise ({rows} rows) exceeds the distance to the limit: "
            f"{LARGER_BASELINE}")


def _notes(floor: float, gap: float, critical: float, n: int, fixed: float) -> tuple[str, ...]:
    """The noise floor, and when no window size could decide the gate because the
    baseline's own noise alone exceeds the distance to the limit, a note saying so."""
    floor_note = f"noise floor {floor:.3g}"
    if fixed > 0.0 and gap > 0.0 and critical * math.sqrt(fixed / (1.0 / n + fixed)) >= gap:
        return floor_note, larger_baseline(round(1.0 / fixed))
    return (floor_note,)


def _detectable(margin: float, room: float) -> float | None:
    """The distance from the limit detected with 80 % power: the noise quantile the verdict
    needs plus 0.84 sd (None beyond the parameter's room on that side)."""
    return margin if math.isfinite(margin) and margin <= room else None


def tv_test(current: Sequence[int], baseline: Sequence[int], limit: float, *,
            alpha: float = ALPHA) -> MeanTest | None:
    """The confidence TV distance of two histograms (counts per bin) against `limit`;
    None when either side has no record."""
    now = np.asarray(current, dtype=np.float64)
    then = np.asarray(baseline, dtype=np.float64)
    n, m = int(now.sum()), int(then.sum())
    if n == 0 or m == 0 or now.size != then.size:
        return None
    shares = then / m
    rng = np.random.default_rng(SEED)
    gaps = (rng.multinomial(n, shares, size=RESAMPLES) / n
            - rng.multinomial(m, shares, size=RESAMPLES) / m)
    tv = _Band(0.5 * float(np.abs(now / n - shares).sum()),
               np.sort(0.5 * np.abs(gaps).sum(axis=1)))
    cumulative = _Band(float(np.abs(np.cumsum(now / n - shares)).max()),
                       np.sort(np.abs(np.cumsum(gaps, axis=1)).max(axis=1)))
    half = alpha / 2.0
    low = max(tv.estimate - _critical(tv.noise, half),
              cumulative.estimate - _critical(cumulative.noise, half))
    floor = _critical(tv.noise, alpha)
    p_above = min(1.0, 2.0 * min(tv.p_above(limit), cumulative.p_above(limit)))
    above = tv.estimate >= limit
    spread = _Z_POWER * 0.5 * math.sqrt(1.0 / n + 1.0 / m)
    if above:
        critical = min(_critical(tv.noise, half), _critical(cumulative.noise, half))
        gap = max(tv.estimate, cumulative.estimate) - limit
    else:
        critical, gap = floor, limit - tv.estimate
    return MeanTest(
        method=TV_METHOD.format(r=RESAMPLES) + f" (n={n}, baseline {m})",
        n=n,
        limit=limit,
        estimate=tv.estimate,
        low=_clip(low, 0.0, 1.0),
        high=_clip(tv.estimate + floor, 0.0, 1.0),
        p_above=p_above,
        p_below=tv.p_below(limit),
        cases_needed=_needed(gap, critical, n, 1.0 / m),
        detectable=_detectable(critical + spread, (1.0 - limit) if above else limit),
        notes=_notes(floor, gap, critical, n, 1.0 / m),
    )


@dataclass(frozen=True)
class Bins:
    """Reliability bins of one group: records with known correctness per bin, how many of
    them were correct, and their mean confidence (None for an empty bin)."""

    counts: tuple[int, ...]
    correct: tuple[int, ...]
    confidence: tuple[float | None, ...]

    @classmethod
    def of(cls, reliability: Sequence[Mapping[str, Any]]) -> Bins:
        """From a report's `calibration.reliability` rows (count, accuracy, mean_confidence)."""
        counts = tuple(int(row["count"]) for row in reliability)
        correct = tuple(round(float(row["accuracy"]) * count) if count else 0
                        for row, count in zip(reliability, counts, strict=True))
        confidence = tuple(None if row["mean_confidence"] is None
                           else float(row["mean_confidence"]) for row in reliability)
        return cls(counts, correct, confidence)

    @property
    def n(self) -> int:
        return sum(self.counts)

    def ece(self) -> float:
        return sum(abs(k - c * conf) for c, k, conf in zip(self.counts, self.correct,
                                                           self.confidence, strict=True)
                   if c and conf is not None) / self.n

    def noise(self, rng: np.random.Generator) -> np.ndarray:
        """`RESAMPLES` draws of Σ_b |K_b − n_b a_b| / n, K_b ~ Binomial(n_b, a_b)."""
        counts = np.asarray(self.counts, dtype=np.int64)
        accuracy = (np.asarray(self.correct, dtype=np.float64) + 1.0) / (counts + 2.0)
        draws = rng.binomial(counts, accuracy, size=(RESAMPLES, counts.size))
        total: np.ndarray = np.abs(draws - counts * accuracy).sum(axis=1) / self.n
        return total


def _ece_mean_test(estimate: float, noise: np.ndarray, n: int, limit: float, alpha: float,
                   support: tuple[float, float], other_n: float) -> MeanTest:
    band = _Band(estimate, np.sort(noise))
    floor = _critical(band.noise, alpha)
    above = estimate >= limit
    spread = _Z_POWER * float(np.std(noise))
    return MeanTest(
        method=ECE_METHOD.format(r=RESAMPLES) + f" (n={n})",
        n=n,
        limit=limit,
        estimate=estimate,
        low=_clip(estimate - floor, *support),
        high=_clip(estimate + floor, *support),
        p_above=band.p_above(limit),
        p_below=band.p_below(limit),
        cases_needed=_needed(abs(estimate - limit), floor, n, other_n),
        detectable=_detectable(floor + spread,
                               (support[1] - limit) if above else (limit - support[0])),
        notes=_notes(floor, abs(estimate - limit), floor, n, other_n),
    )


def ece_test(bins: Bins, limit: float, *, alpha: float = ALPHA) -> MeanTest | None:
    """The binned ECE of one group against `limit` (None without a labelled record)."""
    if bins.n == 0:
        return None
    noise = bins.noise(np.random.default_rng(SEED))
    return _ece_mean_test(bins.ece(), noise, bins.n, limit, alpha, (0.0, 1.0), 0.0)


def ece_increase_test(current: Bins, baseline: Bins, limit: float, *,
                      alpha: float = ALPHA) -> MeanTest | None:
    """ECE(current) − ECE(baseline) against `limit` (None when a side has no labelled
    record or the bins differ)."""
    if current.n == 0 or baseline.n == 0 or len(current.counts) != len(baseline.counts):
        return None
    rng = np.random.default_rng(SEED)
    noise = current.noise(rng) + baseline.noise(rng)
    return _ece_mean_test(current.ece() - baseline.ece(), noise, current.n, limit, alpha,
                          (-1.0, 1.0), 1.0 / baseline.n)
