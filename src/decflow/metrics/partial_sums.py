"""Exact, mergeable float sums: the sum of many doubles held exactly as one Python int.

Every finite double is an integer multiple of 2**-1074, so a sum of doubles is exactly
``N * 2**-1074`` for some integer N. Partitions compute their N with numpy (split each
double's significand into two halves and add them per binary exponent with `bincount`,
whose float accumulators stay exact below 2**53), partial results merge by integer
addition, and `to_float` rounds once, correctly. The result equals ``math.fsum`` of all
the values in any order, which is what DecGuard computes, so merged partitions give the
same bits as one pass over the whole dataset.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SCALE_BITS = 1074
_LOW_BITS = 26
_EXPONENTS = 2047
# Each half is below 2**27; bincount's float64 accumulators stay exact while the count per
# bucket times 2**27 is below 2**53.
_CHUNK = 1 << 25


def to_float(total: int) -> float:
    """Round an exact sum to the nearest double (Python's int division rounds correctly)."""
    return total / (1 << SCALE_BITS)


def group_sums(
    values: npt.ArrayLike, groups: npt.ArrayLike | None = None, n_groups: int = 1
) -> list[int]:
    """Exact sum of `values` per group (``groups[i]`` in ``range(n_groups)``); values must be
    finite."""
    x = np.ascontiguousarray(values, dtype=np.float64).ravel()
    g = (
        np.zeros(x.size, dtype=np.int64)
        if groups is None
        else np.asarray(groups, dtype=np.int64).ravel()
    )
    totals = [0] * n_groups
    for start in range(0, x.size, _CHUNK):
        _add_chunk(x[start : start + _CHUNK], g[start : start + _CHUNK], n_groups, totals)
    return totals


def _add_chunk(x: np.ndarray, g: np.ndarray, n_groups: int, totals: list[int]) -> None:
    bits = x.view(np.int64)
    biased = (bits >> 52) & 0x7FF
    fraction = bits & ((1 << 52) - 1)
    # value = significand * 2**(shift - 1074), shift = max(biased, 1) - 1
    significand = np.where(biased > 0, fraction | (1 << 52), fraction)
    significand = np.where(bits < 0, -significand, significand)
    shift = np.maximum(biased, 1) - 1
    high = significand >> _LOW_BITS  # floor division keeps high * 2**26 + low exact
    low = significand & ((1 << _LOW_BITS) - 1)
    bucket = g * _EXPONENTS + shift
    size = n_groups * _EXPONENTS
    high_sum = np.bincount(bucket, weights=high.astype(np.float64), minlength=size)
    low_sum = np.bincount(bucket, weights=low.astype(np.float64), minlength=size)
    used = np.flatnonzero((high_sum != 0) | (low_sum != 0))
    for index in used.tolist():
        group, exponent = divmod(index, _EXPONENTS)
        part = (int(high_sum[index]) << _LOW_BITS) + int(low_sum[index])
        totals[group] += part << exponent
