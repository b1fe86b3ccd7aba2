"""Seeded paired bootstrap over cases for a metric that is not a mean of per-case scores.

Macro-F1 is a function of the whole sample (per-label counts), so its change between two
runs has no per-case decomposition to put an interval on. (The ECE's change used this too,
until its upward bias, which the percentile bootstrap keeps, showed: `metrics.ece_change`.)
The paired bootstrap resamples *cases* with replacement — each case carries both runs'
answers, so the pairing (and every correlation between the runs) is kept — recomputes the
metric for both runs on every resample, and reads one-sided 95 % bounds of the change from
the 5th and 95th percentiles.

The seed is fixed, so a report reproduces. Percentile bounds of a bootstrap are only
trusted with enough cases: below `MIN_CASES` the change is not established (and the note
says so), whatever the resamples show.

Resamples are drawn as multinomial case counts (weights), so each statistic is a weighted
sum computed for a chunk of resamples at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

SEED = 20_260_925
RESAMPLES = 2000
MIN_CASES = 50
ALPHA = 0.05
_CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class BootstrapChange:
    """Change (after − before) of a whole-sample metric with percentile bounds."""

    n: int
    estimate: float | None
    low: float | None  # 5th percentile of the resampled change
    high: float | None  # 95th percentile
    sd: float | None  # standard deviation of the resampled change
    resamples: int
    enough_cases: bool
    changes: tuple[float, ...] = ()  # the resampled changes

    def p_values(self, limit: float) -> tuple[float, float]:
        """Percentile p-values against `limit`: the share of resampled changes at or below
        it (H0: change ≤ limit) and at or above it (H0: change ≥ limit)."""
        if not self.changes:
            return 1.0, 1.0
        changes = np.asarray(self.changes)
        return float((changes <= limit).mean()), float((changes >= limit).mean())


def _weight_chunks(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Row 0: every case once (the observed metric); then the resamples' case counts, in
    chunks that keep about `_CHUNK_CELLS` weights in memory at a time."""
    rng = np.random.default_rng(seed)
    yield np.ones((1, n))
    step = max(1, _CHUNK_CELLS // n)
    uniform = np.full(n, 1.0 / n)
    for start in range(0, resamples, step):
        yield rng.multinomial(n, uniform, size=min(step, resamples - start)).astype(float)


def _macro_f1(weights: np.ndarray, expected: np.ndarray, predicted: np.ndarray,
              n_labels: int) -> np.ndarray:
    """Macro-F1 per row of weights over the labels present (expected or predicted)."""
    n = len(expected)
    truth = np.zeros((n, n_labels))
    truth[np.arange(n), expected] = 1.0
    guess = np.zeros((n, n_labels))
    guess[np.arange(n), predicted] = 1.0
    support, guessed = weights @ truth, weights @ guess
    hits = weights @ (truth * guess)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(support + guessed > 0, 2.0 * hits / (support + guessed), 0.0)
    present = (support + guessed) > 0
    return np.asarray((f1 * present).sum(axis=1) / np.maximum(present.sum(axis=1), 1),
                      dtype=np.float64)


def _bootstrap(
    statistic: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    n: int,
    resamples: int,
    seed: int,
) -> BootstrapChange:
    """`statistic(weights)` gives (before, after) per weight row; row 0 is the sample."""
    if n < 2:
        return BootstrapChange(n, None, None, None, None, resamples, False)
    changes = []
    for weights in _weight_chunks(n, resamples, seed):
        before, after = statistic(weights)
        changes.append(after - before)
    change = np.concatenate(changes)
    spread = change[1:]
    low, high = np.quantile(spread, [ALPHA, 1.0 - ALPHA])
    return BootstrapChange(n, float(change[0]), float(low), float(high),
                           float(spread.std(ddof=1)), resamples, n >= MIN_CASES,
                           tuple(spread.tolist()))


def macro_f1_change(
    expected: np.ndarray,
    predicted_before: np.ndarray,
    predicted_after: np.ndarray,
    n_labels: int,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> BootstrapChange:
    """macro-F1(after) − macro-F1(before) on the same labeled cases."""

    def both(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (_macro_f1(weights, expected, predicted_before, n_labels),
                _macro_f1(weights, expected, predicted_after, n_labels))

    return _bootstrap(both, len(expected), resamples, seed)
