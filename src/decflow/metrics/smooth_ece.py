"""SmoothECE (Błasiok & Nakkiran 2023), its reliability curve, and evidence for a limit.

SmoothECE replaces the bins of the binned ECE by kernel smoothing: with residuals
rᵢ = fᵢ − yᵢ (confidence minus correctness) and a Gaussian kernel of bandwidth σ reflected at
0 and 1, smECE_σ = ∫ |Σᵢ K_σ(t, fᵢ) rᵢ| dt / ∫ Σᵢ K_σ(t, fᵢ) dt. SmoothECE itself is
smECE_σ* at the bandwidth where the two agree, σ* = smECE_σ* (smECE_σ only falls as σ grows:
smoothing with a wider Gaussian is a further smoothing of the narrower one, which never
increases an L1 norm, so the fixed point is unique).

The numbers are those of the authors' package `relplot` 1.0.3 (`relplot.smECE`), computed
here with numpy alone (the package pulls scipy, scikit-learn, pandas, seaborn and
matplotlib): each value is split between its two neighbouring nodes of a grid of G(σ) =
⌊max(2000, round(20/σ)) / 2⌋ + 1 nodes on [0, 1] (linear weights), the node sums are
convolved with the Gaussian sampled on the grid (mirrored at both ends), interpolated to
max(round(10/σ), 200) evaluation points, a density floor of 1e-4 is added, and σ* is found
by ten bisection steps from 1 (the smallest tested σ not below its own smECE). Tests compare
with `relplot`'s own outputs on fixed vectors (tests/fixtures/relplot/).

Because the estimate depends on the data only through the grid's node sums, statistics of
record partitions merge by adding their grids (``CalibrationGrid.merge``), which is how the
production check computes it; for σ ≥ 0.01 every grid is the 1,001-node one, so merged
partitions give the same value as one pass up to float rounding (sums reassociated: ≤ 1e-12
relative). Below 0.01 `relplot` refines the grid; the production check then reports
"below 0.01" (the gate's limit must be ≥ 0.01).

Evidence for ``max_smooth_ece: L``: smECE > L exactly when smECE_L > L (the fixed point lies
above L exactly when the curve is still above the diagonal at L), so the gate needs only the
fixed bandwidth σ = L, where the estimate's error is |Ŝ_L − S_L| ≤ ‖ê − e‖₁ (triangle
inequality; ê the smoothed sample residual, e its expectation given the suite's
confidences). Given the confidences, ê − e is a smoothed sum of independent centred 0/1
outcomes, each of variance p(1 − p) ≤ ¼. Its 95 % quantile q is taken from a seeded Gaussian
multiplier field with that largest variance (each grid node N(0, ¼ Σ w), the same
smoothing), plus half a case's share for the discreteness of counts: the Gaussian field
whose covariance exceeds the true one by a positive semi-definite part has the
stochastically larger norm (Anderson's theorem), whatever the unknown accuracies. (Variances
read off the observed residuals are too small exactly when few answers are wrong: with
every confidence at 0.99 and accuracy 0.94 — smECE exactly 0.05 — that gave a wrong PASS in
19 % of 50-case suites, and a wrong FAIL in 36 % of 20-case suites at confidence 0.9 and
accuracy 0.95.) FAIL when Ŝ_L − q > L, PASS when Ŝ_L + q < L, otherwise not established.
The triangle inequality makes both sides conservative; the error rates, exact for equal
confidences and simulated otherwise, are in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decflow.metrics.evidence import ALPHA, Evidence

DENSITY_FLOOR = 1e-4
MIN_EVALUATION_POINTS = 200
PRODUCTION_NODES = 1001  # G(σ) for every σ ≥ 0.01
SMALLEST_LIMIT = 0.01
BISECTION_STEPS = 10
SMALLEST_BANDWIDTH = 0.001
REPLICATES = 200
METHOD = ("SmoothECE at bandwidth = limit, L1 noise bound from a Gaussian field at the largest "
          "0/1 variance")

Floats = npt.NDArray[np.float64]


def nodes_for(sigma: float) -> int:
    """Grid nodes at bandwidth σ (1,001 for every σ ≥ 0.01)."""
    return max(2000, round(20 / sigma)) // 2 + 1


@dataclass(frozen=True)
class CalibrationGrid:
    """Node sums of the linear split of each record onto a grid of ``nodes`` points:
    ``mass`` Σ w and ``residual`` Σ w·(f − y)."""

    nodes: int
    mass: Floats
    residual: Floats

    @classmethod
    def of(cls, confidence: npt.ArrayLike, correct: npt.ArrayLike, nodes: int) -> CalibrationGrid:
        f = np.asarray(confidence, dtype=np.float64)
        return grouped_grids(f, np.asarray(correct, dtype=np.float64),
                             np.zeros(f.size, dtype=np.int64), 1, nodes)[0]

    def merge(self, other: CalibrationGrid) -> CalibrationGrid:
        if other.nodes != self.nodes:
            raise ValueError(f"grids of {self.nodes} and {other.nodes} nodes do not merge")
        return CalibrationGrid(self.nodes, self.mass + other.mass, self.residual + other.residual)


def grouped_grids(confidence: Floats, correct: Floats, groups: npt.NDArray[np.int64],
                  n_groups: int, nodes: int) -> list[CalibrationGrid]:
    """One grid per group number 0 … n_groups − 1 (each record split between its two
    neighbouring nodes, one bincount per sum and side over all groups)."""
    r = confidence - correct
    position = confidence * (nodes - 1)
    left = np.clip(position.astype(np.int64), 0, nodes - 2)
    frac = position - left
    base = groups * nodes + left
    size = n_groups * nodes

    def sums(values: Floats | None) -> Floats:
        low = 1 - frac if values is None else values * (1 - frac)
        high = frac if values is None else values * frac
        total = np.bincount(base, weights=low, minlength=size).astype(np.float64)
        total += np.bincount(base + 1, weights=high, minlength=size)
        return total.reshape(n_groups, nodes)

    mass, residual = sums(None), sums(r)
    return [CalibrationGrid(nodes, mass[i], residual[i]) for i in range(n_groups)]


GridSource = Callable[[int], CalibrationGrid | None]


def grids_of(confidence: npt.ArrayLike, correct: npt.ArrayLike) -> GridSource:
    """Grids of raw records at any node count (cached)."""
    f = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    made: dict[int, CalibrationGrid] = {}

    def grid(nodes: int) -> CalibrationGrid:
        if nodes not in made:
            made[nodes] = CalibrationGrid.of(f, y, nodes)
        return made[nodes]

    return grid


def stored_grid(grid: CalibrationGrid) -> GridSource:
    """A merged production grid: only its own node count (σ ≥ 0.01) is available."""
    return lambda nodes: grid if nodes == grid.nodes else None


def _kernel(sigma: float, nodes: int) -> Floats:
    t = np.linspace(0.0, 1.0, nodes)
    return np.exp(-(t - 0.5) ** 2 / (2 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma)


def _smooth(values: Floats, sigma: float) -> Floats:
    """Node sums (last axis) convolved with the sampled Gaussian, mirrored at both ends."""
    nodes = values.shape[-1]
    extended = np.concatenate([values[..., :0:-1], values, values[..., -2::-1]], axis=-1)
    kernel = _kernel(sigma, nodes)
    size = extended.shape[-1] + nodes - 1
    length = 1 << (size - 1).bit_length()
    full = np.fft.irfft(np.fft.rfft(extended, length) * np.fft.rfft(kernel, length), length)
    start = nodes - 1 + nodes // 2  # 'valid' convolution, then the centred window
    return full[..., start:start + nodes]


def _evaluation(sigma: float) -> Floats:
    return np.linspace(0.0, 1.0, max(round(10 / sigma), MIN_EVALUATION_POINTS))


def _interpolate(t: Floats, smoothed: Floats) -> Floats:
    nodes = smoothed.shape[-1]
    index = np.clip((t * (nodes - 1)).astype(np.int64), 0, nodes - 2)
    frac = (t - index / (nodes - 1)) * (nodes - 1)
    values: Floats = smoothed[..., index] * (1 - frac) + smoothed[..., index + 1] * frac
    return values


@dataclass(frozen=True)
class Smoothed:
    """The smoothed residual and density on the evaluation points at one bandwidth."""

    sigma: float
    t: Floats
    residual: Floats
    density: Floats  # with the 1e-4 floor

    @property
    def value(self) -> float:
        return float(np.abs(self.residual).sum() / self.density.sum())


def smoothed(grid: CalibrationGrid, sigma: float) -> Smoothed:
    t = _evaluation(sigma)
    residual = _interpolate(t, _smooth(grid.residual, sigma))
    density = _interpolate(t, _smooth(grid.mass, sigma)) + DENSITY_FLOOR
    return Smoothed(sigma, t, residual, density)


@dataclass(frozen=True)
class SmoothEce:
    value: float | None  # smECE at σ*; None when σ* is below what the grid resolves
    bandwidth: float
    below: float | None  # set when only "smECE < below" is known (a stored coarse grid)
    curve: list[dict[str, float]]  # reliability curve: confidence, accuracy, density share

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "bandwidth": self.bandwidth, "below": self.below,
                "curve": self.curve}


def smooth_ece_at(source: GridSource, sigma: float) -> float | None:
    grid = source(nodes_for(sigma))
    return None if grid is None else smoothed(grid, sigma).value


def smooth_ece(source: GridSource, curve_points: int = 21) -> SmoothEce:
    """SmoothECE with its bandwidth chosen as in `relplot.smECE`, and the reliability curve
    at that bandwidth (``curve_points`` confidences evenly spaced on [0, 1])."""

    def holds(sigma: float) -> bool | None:
        value = smooth_ece_at(source, sigma)
        return None if value is None else sigma < SMALLEST_BANDWIDTH or sigma < value

    start, end = 1.0, 0.0
    if not holds(start):
        for _ in range(BISECTION_STEPS):
            middle = (start + end) / 2
            verdict = holds(middle)
            if verdict is None:  # the stored grid cannot resolve it: smECE < start
                return SmoothEce(None, start, start, _curve(source, start, curve_points))
            if verdict:
                end = middle
            else:
                start = middle
    value = smooth_ece_at(source, start)
    return SmoothEce(value, start, None, _curve(source, start, curve_points))


def _curve(source: GridSource, sigma: float, points: int) -> list[dict[str, float]]:
    grid = source(nodes_for(sigma))
    if grid is None:
        return []
    t = np.linspace(0.0, 1.0, points)
    density = _interpolate(t, _smooth(grid.mass, sigma)) + DENSITY_FLOOR
    gap = _interpolate(t, _smooth(grid.residual, sigma)) / density
    share = density / density.sum()
    return [{"confidence": float(c), "accuracy": float(min(1.0, max(0.0, c - g))),
             "density": float(s)} for c, g, s in zip(t, gap, share, strict=True)]


def _coarse(values: Floats, nodes: int) -> Floats:
    """Node sums moved onto a coarser grid of ``nodes`` points by the same linear split."""
    fine = values.shape[-1]
    if nodes >= fine:
        return values
    position = np.linspace(0.0, 1.0, fine) * (nodes - 1)
    left = np.clip(position.astype(np.int64), 0, nodes - 2)
    frac = position - left
    low = np.bincount(left, weights=values * (1 - frac), minlength=nodes).astype(np.float64)
    return low + np.bincount(left + 1, weights=values * frac, minlength=nodes)


def noise_quantile(grid: CalibrationGrid, sigma: float, *, seed: int = 0,
                   replicates: int = REPLICATES, level: float = 1 - ALPHA) -> float:
    """The ``level`` quantile of the L1 error of the smoothed residual at σ: a seeded
    Gaussian multiplier field with each case's largest 0/1 variance, ¼ (each node gets
    N(0, ¼ Σ w), smoothed like the residual), plus half a case's share for the discreteness
    of counts. The noise is drawn on a grid of spacing σ/10 (a smooth field at scale σ does
    not see finer detail), which keeps a replicate to one short FFT."""
    rng = np.random.default_rng(seed)
    t = _evaluation(sigma)
    smoothed_mass = float(_interpolate(t, _smooth(grid.mass, sigma)).sum())
    density = smoothed_mass + DENSITY_FLOOR * t.size
    variance = _coarse(grid.mass / 4.0, min(grid.nodes, round(10 / sigma) + 1))
    draws = rng.standard_normal((replicates, variance.size)) * np.sqrt(variance)
    noise = _interpolate(t, _smooth(draws, sigma))
    half_case = 0.5 * smoothed_mass / max(float(grid.mass.sum()), 1.0) / density
    return float(np.quantile(np.abs(noise).sum(axis=1) / density, level)) + half_case


def smooth_ece_evidence(source: GridSource, limit: float, n: int, *, seed: int = 0) -> Evidence:
    """Evidence for ``smECE <= limit`` (see the module docstring)."""
    if not SMALLEST_LIMIT <= limit < 1.0:
        raise ValueError(f"max_smooth_ece must be in [{SMALLEST_LIMIT}, 1), got {limit}")
    grid = source(nodes_for(limit))
    if grid is None or n == 0:
        return Evidence(METHOD, n, "not_established", notes=("not exercised",))
    estimate = smoothed(grid, limit).value
    margin = noise_quantile(grid, limit, seed=seed)
    low, high = max(0.0, estimate - margin), min(1.0, estimate + margin)
    verdict = "fails" if low > limit else "holds" if high < limit else "not_established"
    needed = None
    if verdict == "not_established" and estimate != limit:
        # The margin shrinks like 1/√n: the cases at which it would clear the gap.
        needed = math.ceil(n * (margin / abs(estimate - limit)) ** 2)
    return Evidence(METHOD, n, verdict, estimate=estimate, low=low, high=high,  # type: ignore[arg-type]
                    cases_needed=needed, detectable=margin if verdict == "not_established"
                    else None)
