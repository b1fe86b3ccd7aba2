"""Exact sums, means and percentiles shared by every metric family.

DecGuard sums with ``math.fsum`` (correctly rounded), so its numbers do not depend on
summation order. Matching it bit for bit needs correctly rounded sums here too: across cases
we hand the column to ``math.fsum`` in one call; across the labels of many rows at once
(Brier terms, TV distances, expected levels) ``row_sums`` runs the same error-free
algorithm vectorized over rows, looping only over columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Beyond this many stored partials per row the zero partials are squeezed out; a row of
# finite doubles never needs more than a few dozen non-zero partials.
_COMPACT_WIDTH = 8


def exact_sum(values: npt.ArrayLike) -> float:
    """Correctly rounded sum of a 1-D array (``math.fsum``)."""
    return math.fsum(np.asarray(values, dtype=np.float64).ravel().tolist())


def exact_mean(values: npt.ArrayLike) -> float | None:
    """``fsum(values) / len(values)``; None for no values."""
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        return None
    return math.fsum(array.tolist()) / array.size


def _two_sum(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """hi = fl(a + b) and the exact rounding error lo, so a + b == hi + lo exactly."""
    hi = a + b
    b_virtual = hi - a
    lo = (a - (hi - b_virtual)) + (b - b_virtual)
    return hi, lo


def _compact(partials: list[FloatArray]) -> list[FloatArray]:
    """Move each row's zero partials to the top (keeping the order of the others) and drop
    the columns that are then zero in every row. Zeros never change an expansion's value."""
    stacked = np.stack(partials, axis=1)
    order = np.argsort(stacked == 0.0, axis=1, kind="stable")
    stacked = np.take_along_axis(stacked, order, axis=1)
    width = int(np.count_nonzero(stacked, axis=1).max(initial=0))
    return [stacked[:, j] for j in range(max(width, 1))]


def row_sums(matrix: npt.ArrayLike) -> FloatArray:
    """Per-row ``math.fsum`` of a 2-D float array of finite values, vectorized over rows.

    Most rows are decided by a cascade of error-free additions: the running sum ``s`` and
    the exact errors ``e`` of each step (the row's sum is exactly ``s + sum(e)``), the
    errors added naively (``E``, off by at most `_ERROR_BOUND` times their absolute sum),
    and ``s + E`` rounded to ``r`` with its exact remainder ``d``. When ``|d|`` plus that
    bound stays below half the gap between ``r`` and its neighbour, the exact sum is
    nearer to ``r`` than to any other double, so ``r`` is what fsum returns. The other rows
    (a tie or near-tie, a zero sum) take the exact path, `_expansion_sums`.
    """
    values = np.asarray(matrix, dtype=np.float64)
    n_rows, n_cols = values.shape
    if n_cols <= 1:
        return _expansion_sums(values) if n_cols else np.zeros(n_rows)
    total = values[:, 0]
    errors = np.zeros(n_rows)
    error_size = np.zeros(n_rows)
    for j in range(1, n_cols):
        total, error = _two_sum(total, values[:, j])
        errors += error
        error_size += np.abs(error)
    rounded, remainder = _two_sum(total, errors)
    gap = np.spacing(np.abs(rounded))
    # below a power of two the gap to the next smaller double is half the one above
    half_gap = np.where(np.frexp(rounded)[0] == np.copysign(0.5, rounded), gap / 4, gap / 2)
    # (written so that a NaN, from an overflow, is unsure too)
    unsure = ~((np.abs(remainder) + error_size * (_ERROR_BOUND * n_cols) < half_gap)
               & (rounded != 0.0))
    if unsure.any():
        rounded[unsure] = _expansion_sums(values[unsure])
    return rounded


# Relative bound on the naive sum of the cascade's errors (≥ (n - 1) * 2**-53 with room
# for the rounding of the bound itself), per column.
_ERROR_BOUND = 2.0**-50


def _expansion_sums(values: FloatArray) -> FloatArray:
    """Per-row ``math.fsum``, exact for every row: each row keeps a non-overlapping
    expansion (Shewchuk's grow-expansion, as in fsum) that represents its running sum
    exactly; the final step rounds the expansion exactly as CPython's fsum does,
    including its round-half-even correction."""
    n_cols = values.shape[1]
    partials: list[FloatArray] = []
    for j in range(n_cols):
        x = values[:, j]
        grown: list[FloatArray] = []
        for partial in partials:
            x, lo = _two_sum(x, partial)
            grown.append(lo)
        grown.append(x)
        partials = _compact(grown) if len(grown) > _COMPACT_WIDTH else grown
    return _round_expansion(np.stack(partials, axis=1))


def _round_expansion(partials: FloatArray) -> FloatArray:
    """Round each row's expansion (columns in increasing magnitude, zeros anywhere) to the
    nearest double, following the final loop of CPython's fsum. Zero partials pass through
    that loop unchanged; only its round-half-even test must look past them, to the nearest
    non-zero partial below."""
    n_rows, width = partials.shape
    rows = np.arange(n_rows)
    nonzero = partials != 0.0
    below_value = np.zeros_like(partials)
    for j in range(1, width):
        previous = partials[:, j - 1]
        below_value[:, j] = np.where(nonzero[:, j - 1], previous, below_value[:, j - 1])
    index = width - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    hi = partials[rows, index]
    lo = np.zeros(n_rows)
    active = index > 0
    while active.any():
        index = np.where(active, index - 1, index)
        y = partials[rows, index]
        new_hi = hi + y
        new_lo = y - (new_hi - hi)
        hi = np.where(active, new_hi, hi)
        lo = np.where(active, new_lo, lo)
        active &= (new_lo == 0.0) & (index > 0)
    below = below_value[rows, index]
    halfway = ((lo < 0.0) & (below < 0.0)) | ((lo > 0.0) & (below > 0.0))
    doubled = lo * 2.0
    nudged = hi + doubled
    rounded: npt.NDArray[np.float64] = np.where(halfway & (nudged - hi == doubled), nudged, hi)
    return rounded


def percentiles(values: npt.ArrayLike, qs: Sequence[float]) -> list[float | None]:
    """Percentiles by linear interpolation between closest ranks (position (n-1)*q/100),
    written as ``lower + (upper - lower) * fraction`` like DecGuard; None for no values."""
    ordered = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if ordered.size == 0:
        return [None for _ in qs]
    last = ordered.size - 1
    result: list[float | None] = []
    for q in qs:
        position = last * q / 100.0
        low = math.floor(position)
        high = min(low + 1, last)
        lower, upper = float(ordered[low]), float(ordered[high])
        result.append(lower + (upper - lower) * (position - low))
    return result
