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

**Beyond the draws** a simulated p-value cannot go below 1/(R + 1) = 0.0005, and Holm across
a family of m checks asks for α/m: from m = 50 (100 for the ECE gates) a drift gate could
never fail, whatever the drift. Beyond the largest draw the p-value is therefore the smaller
of that floor and an analytic tail bound of the noise (`NoiseTail`), valid without any plug-in:

- TV noise ½‖(p̂ − p) − (b̂ − b)‖₁: one record moves it by at most 1/n (1/m for a baseline
  record), so by McDiarmid P(noise ≥ E + t) ≤ exp(−2t²/(1/n + 1/m)), with
  E ≤ ½(√(K/n) + √(K/m)) over K bins (Cauchy–Schwarz);
- cumulative noise ≤ D_n + D_m, the two empirical distribution functions' sup distances:
  by Dvoretzky–Kiefer–Wolfowitz (Massart's constant), P ≥ x ≤ 4·exp(−2x²·nm/(√n + √m)²);
- ECE noise Σ_b |K_b − n_b ā_b| / n: one record moves it by at most 1/n, and
  E ≤ Σ_b √n_b / (2n) (Jensen, at the worst variance 1/4): the same McDiarmid form (the
  increase adds the two sides).

Below the floor the p-value is then at most u only when that bound is (so it stays valid);
above it nothing changes, and a bound at a level below the floor is read off the analytic
tail in the same way.
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


@dataclass(frozen=True)
class NoiseTail:
    """An analytic bound on the noise's tail: P(noise ≥ x) ≤ scale·exp(−(x − center)²/spread)
    for x > center (see the module docstring)."""

    scale: float
    center: float
    spread: float

    def p(self, x: float) -> float:
        if x <= self.center:
            return 1.0
        return min(1.0, self.scale * math.exp(-((x - self.center) ** 2) / self.spread))

    def at(self, beta: float) -> float:
        """The x where the bound falls to β."""
        return self.center + math.sqrt(self.spread * max(0.0, math.log(self.scale / beta)))

    @classmethod
    def bounded_differences(cls, center: float, *sizes: int) -> NoiseTail:
        """McDiarmid's bound for a noise that one record of a sample of size n moves by at
        most 1/n, with mean at most `center`."""
        return cls(1.0, center, sum(1.0 / size for size in sizes) / 2.0)


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@dataclass(frozen=True)
class _Band:
    """A distance, its noise draws (sorted), the noise's analytic tail beyond them, and what
    they give against one limit."""

    estimate: float
    noise: np.ndarray
    tail: NoiseTail

    def exceed(self, x: float) -> float:
        """(1 + #{noise ≥ x}) / (R + 1), the chance the noise alone reaches x; beyond every
        draw, the smaller of that floor and the analytic tail."""
        above = self.noise.size - int(np.searchsorted(self.noise, x, side="left"))
        share = (1.0 + above) / (self.noise.size + 1.0)
        return min(share, self.tail.p(x)) if above == 0 else share

    def critical(self, beta: float) -> float:
        """The smallest noise value c with `exceed(x) < β` for every x > c: an excess above
        c is shown at level β (below the draws' floor, read off the analytic tail)."""
        allowed = math.ceil(beta * (self.noise.size + 1.0) - 1.0) - 1  # draws ≥ x allowed
        if allowed < 0:
            return max(float(self.noise[-1]), self.tail.at(beta))
        return float(self.noise[self.noise.size - 1 - allowed])

    def p_above(self, limit: float) -> float:
        return self.exceed(self.estimate - limit) if self.estimate > limit else 1.0

    def p_below(self, limit: float) -> float:
        return self.exceed(limit - self.estimate) if self.estimate < limit else 1.0


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


def tv_noise_tails(n: int, m: int, bins: int) -> tuple[NoiseTail, NoiseTail]:
    """The analytic tails of the TV noise and of the cumulative noise of two samples of n
    and m records over `bins` bins (McDiarmid; Dvoretzky–Kiefer–Wolfowitz)."""
    return (NoiseTail.bounded_differences(0.5 * (math.sqrt(bins / n) + math.sqrt(bins / m)),
                                          n, m),
            NoiseTail(4.0, 0.0, (math.sqrt(n) + math.sqrt(m)) ** 2 / (2.0 * n * m)))


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
    tv_tail, cumulative_tail = tv_noise_tails(n, m, now.size)
    tv = _Band(0.5 * float(np.abs(now / n - shares).sum()),
               np.sort(0.5 * np.abs(gaps).sum(axis=1)), tv_tail)
    cumulative = _Band(float(np.abs(np.cumsum(now / n - shares)).max()),
                       np.sort(np.abs(np.cumsum(gaps, axis=1)).max(axis=1)), cumulative_tail)
    half = alpha / 2.0
    low = max(tv.estimate - tv.critical(half), cumulative.estimate - cumulative.critical(half))
    floor = tv.critical(alpha)
    p_above = min(1.0, 2.0 * min(tv.p_above(limit), cumulative.p_above(limit)))
    above = tv.estimate >= limit
    spread = _Z_POWER * 0.5 * math.sqrt(1.0 / n + 1.0 / m)
    if above:
        critical = min(tv.critical(half), cumulative.critical(half))
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


def ece_noise_tail(*sides: Bins) -> NoiseTail:
    """The analytic tail of the ECE noise of one group (or the sum of two groups' noises):
    one record moves Σ_b |K_b − n_b a_b| / n by at most 1/n, and its mean is at most
    Σ_b √n_b / (2n) whatever the accuracies (Jensen at the worst variance 1/4)."""
    center = sum(sum(math.sqrt(count) for count in side.counts) / (2.0 * side.n)
                 for side in sides)
    return NoiseTail.bounded_differences(center, *(side.n for side in sides))


def _ece_mean_test(estimate: float, noise: np.ndarray, tail: NoiseTail, n: int, limit: float,
                   alpha: float, support: tuple[float, float], other_n: float) -> MeanTest:
    band = _Band(estimate, np.sort(noise), tail)
    floor = band.critical(alpha)
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
    return _ece_mean_test(bins.ece(), noise, ece_noise_tail(bins), bins.n, limit, alpha,
                          (0.0, 1.0), 0.0)


def ece_increase_test(current: Bins, baseline: Bins, limit: float, *,
                      alpha: float = ALPHA) -> MeanTest | None:
    """ECE(current) − ECE(baseline) against `limit` (None when a side has no labelled
    record or the bins differ)."""
    if current.n == 0 or baseline.n == 0 or len(current.counts) != len(baseline.counts):
        return None
    rng = np.random.default_rng(SEED)
    noise = current.noise(rng) + baseline.noise(rng)
    return _ece_mean_test(current.ece() - baseline.ece(), noise,
                          ece_noise_tail(current, baseline), current.n, limit, alpha,
                          (-1.0, 1.0), 1.0 / baseline.n)
