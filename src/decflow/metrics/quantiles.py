"""Mergeable distributions for percentiles: exact up to `EXACT_LIMIT` values per group, a
deterministic log-bucket sketch beyond.

`ValueCounts` keeps the exact multiset (DecGuard's percentiles bit for bit). Past
`EXACT_LIMIT` values a group keeps a `LogSketch`: the DDSketch mapping of every positive
value to bucket ``ceil(log(x) / log(gamma))``, zeros counted apart, counts added on merge.
Its percentile is computed as the exact one (linear interpolation between the order
statistics at ranks ``floor`` and ``ceil`` of ``(n - 1) * q / 100``), with each order
statistic replaced by its bucket's representative, which lies within `RELATIVE_ERROR` of
every value in the bucket. Values are non-negative (validation rejects negative latencies
and costs; confidences are probabilities), so the interpolated result is within
`RELATIVE_ERROR` × the exact percentile of it — a deterministic bound, for every input.

Why not a randomized sketch (KLL, REQ): the same input must give the same report bits, and
the Python binding of Apache DataSketches exposes no seed for their compaction coin (three
runs over the same values gave three different sketches). Bucket counts are a pure function
of the multiset of values, so a group's distribution, exact or sketched, does not depend on
how the records were split into partitions or in which order partitions were merged: a
Dask fan-out gives the single-process report bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

# Beyond this many values in one group, percentiles come from the sketch.
EXACT_LIMIT = 100_000
# The stated bound: |sketched - exact| <= RELATIVE_ERROR * exact. The buckets are built a
# hair narrower, so rounding in `log` at a bucket edge cannot push a value past it.
RELATIVE_ERROR = 0.001
_ALPHA = RELATIVE_ERROR * (1 - 1e-6)
_GAMMA = (1 + _ALPHA) / (1 - _ALPHA)
_LOG_GAMMA = math.log(_GAMMA)


class _Part:
    """Values (and their counts; None: each once) of one piece of a `ValueCounts`, with
    their log-bucket counts once a sketch needed them: parts are shared by the merges
    that collect them (a batch's whole and its segments), so each value is bucketed once."""

    __slots__ = ("_sketch", "counts", "values")

    def __init__(self, values: np.ndarray, counts: np.ndarray | None) -> None:
        self.values, self.counts = values, counts
        self._sketch: LogSketch | None = None

    @property
    def n(self) -> int:
        return self.values.size if self.counts is None else int(self.counts.sum())

    def sketch(self) -> LogSketch:
        if self._sketch is None:
            self._sketch = LogSketch.of(self.values, self.counts)
        return self._sketch


class ValueCounts:
    """Exact distribution of a column, enough for exact percentiles and never larger than
    the column: parts of (values, counts), where counts of None mean each value stands for
    itself once (the values need not be distinct or sorted then). Merging only collects
    parts; percentiles select the needed ranks across them in linear time."""

    def __init__(self, values: npt.ArrayLike | None = None,
                 counts: npt.ArrayLike | None = None) -> None:
        self._parts: list[_Part] = []
        if values is not None:
            array = np.asarray(values, dtype=np.float64)
            weights = None if counts is None else np.asarray(counts, dtype=np.int64)
            if weights is not None and weights.size and int(weights.max()) == 1:
                weights = None
            if array.size:
                self._parts.append(_Part(array, weights))

    @classmethod
    def of(cls, values: npt.ArrayLike) -> ValueCounts:
        distinct, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
        return cls(distinct, counts)

    def merge(self, other: ValueCounts) -> ValueCounts:
        merged = ValueCounts()
        merged._parts = self._parts + other._parts
        return merged

    @property
    def n(self) -> int:
        return sum(p.n for p in self._parts)

    def joined(self) -> tuple[np.ndarray, np.ndarray | None]:
        """All values, unsorted, and their counts (None when each value is there once)."""
        if not self._parts:
            return np.empty(0), None
        values = np.concatenate([p.values for p in self._parts])
        if all(p.counts is None for p in self._parts):
            return values, None
        counts = np.concatenate(
            [np.ones(p.values.size, dtype=np.int64) if p.counts is None else p.counts
             for p in self._parts]
        )
        return values, counts

    def compact(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct values, counts) of all parts, kept as the only part."""
        if not self._parts:
            return np.empty(0), np.empty(0, dtype=np.int64)
        values, joined = self.joined()
        counts = np.ones(values.size, dtype=np.int64) if joined is None else joined
        distinct, inverse = np.unique(values, return_inverse=True)
        summed = np.bincount(inverse, weights=counts, minlength=distinct.size).astype(np.int64)
        self._parts = [_Part(distinct, None if int(summed.max()) == 1 else summed)]
        return distinct, summed

    def _ranked(self, ranks: list[int]) -> list[float]:
        """The values at 0-based ranks of the sorted multiset."""
        if all(p.counts is None for p in self._parts):
            values = np.concatenate([p.values for p in self._parts])
            chosen = np.partition(values, sorted(set(ranks)))
            return [float(chosen[r]) for r in ranks]
        values, counts = self.compact()
        ends = np.cumsum(counts)
        return [float(values[np.searchsorted(ends, r, side="right")]) for r in ranks]

    def percentile(self, q: float) -> float | None:
        """Linear interpolation between closest ranks at position (n - 1) * q / 100."""
        return _interpolated(self.n, q, self._ranked)

    def sketch(self) -> LogSketch:
        """The log-bucket sketch of these values: each part's (bucketed once, then kept
        with the part), merged — the same buckets and counts as sketching them all."""
        if not self._parts:
            return LogSketch()
        sketch = self._parts[0].sketch()
        for part in self._parts[1:]:
            sketch = sketch.merge(part.sketch())
        return sketch


def _interpolated(n: int, q: float, ranked: Any) -> float | None:
    if n == 0:
        return None
    position = (n - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    lower, upper = ranked([low, high])
    if low == high:
        return float(lower)
    return float(lower + (upper - lower) * (position - low))


class LogSketch:
    """Counts of values per logarithmic bucket (zeros apart): mergeable by addition,
    deterministic, relative error `RELATIVE_ERROR` on every percentile."""

    def __init__(self, zeros: int = 0, buckets: npt.ArrayLike | None = None,
                 counts: npt.ArrayLike | None = None) -> None:
        self.zeros = int(zeros)
        self.buckets = np.asarray([] if buckets is None else buckets, dtype=np.int64)
        self.counts = np.asarray([] if counts is None else counts, dtype=np.int64)

    @classmethod
    def of(cls, values: npt.ArrayLike, counts: npt.ArrayLike | None = None) -> LogSketch:
        x = np.asarray(values, dtype=np.float64)
        positive = x > 0
        weights = None if counts is None else np.asarray(counts, dtype=np.int64)
        zeros = int(x.size - np.count_nonzero(positive)) if weights is None else int(
            weights[~positive].sum()
        )
        index = np.ceil(np.log(x[positive]) / _LOG_GAMMA).astype(np.int64)
        if not index.size:
            return cls(zeros)
        low = int(index.min())
        span = int(index.max()) - low + 1
        chosen = None if weights is None else weights[positive]
        if span <= max(1 << 16, 4 * index.size):  # a dense count is cheaper than a sort
            dense = np.bincount(index - low, weights=chosen, minlength=span)
            buckets = np.flatnonzero(dense)
            return cls(zeros, buckets + low, dense[buckets].astype(np.int64))
        buckets, inverse = np.unique(index, return_inverse=True)
        summed = np.bincount(inverse, weights=chosen, minlength=buckets.size)
        return cls(zeros, buckets, summed.astype(np.int64))

    @property
    def n(self) -> int:
        return self.zeros + int(self.counts.sum())

    def merge(self, other: LogSketch) -> LogSketch:
        buckets, inverse = np.unique(
            np.concatenate([self.buckets, other.buckets]), return_inverse=True
        )
        counts = np.bincount(
            inverse, weights=np.concatenate([self.counts, other.counts]), minlength=buckets.size
        )
        return LogSketch(self.zeros + other.zeros, buckets, counts.astype(np.int64))

    def _ranked(self, ranks: list[int]) -> list[float]:
        ends = np.cumsum(self.counts)
        out = []
        for rank in ranks:
            if rank < self.zeros:
                out.append(0.0)
                continue
            i = int(np.searchsorted(ends, rank - self.zeros, side="right"))
            out.append(2 * _GAMMA ** float(self.buckets[i]) / (_GAMMA + 1))
        return out

    def percentile(self, q: float) -> float | None:
        return _interpolated(self.n, q, self._ranked)


class Distribution:
    """A group's values: exact (`ValueCounts`) while there are at most `EXACT_LIMIT` of
    them, a `LogSketch` beyond. Which one a group ends with depends only on its number of
    values, never on how it was split."""

    def __init__(self, exact: ValueCounts | None = None, sketch: LogSketch | None = None,
                 n: int | None = None) -> None:
        self.exact = exact if exact is not None or sketch is not None else ValueCounts()
        self.sketch = sketch
        if n is None:
            n = self.exact.n if self.exact is not None else sketch.n if sketch is not None else 0
        self.n = n
        if self.exact is not None and self.n > EXACT_LIMIT:
            self.sketch, self.exact = self.exact.sketch(), None

    @classmethod
    def of(cls, values: npt.ArrayLike, counts: npt.ArrayLike | None = None) -> Distribution:
        array = np.asarray(values, dtype=np.float64)
        n = array.size if counts is None else int(np.asarray(counts).sum())
        if n > EXACT_LIMIT:
            return cls(sketch=LogSketch.of(array, counts), n=n)
        # the values as they are: percentiles select ranks without sorting
        return cls(exact=ValueCounts(array, counts), n=n)

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    def merge(self, other: Distribution) -> Distribution:
        if self.exact is not None and other.exact is not None:
            return Distribution(exact=self.exact.merge(other.exact), n=self.n + other.n)
        mine = self.sketch if self.sketch is not None else self.exact.sketch()  # type: ignore[union-attr]
        theirs = other.sketch if other.sketch is not None else other.exact.sketch()  # type: ignore[union-attr]
        return Distribution(sketch=mine.merge(theirs), n=self.n + other.n)

    def percentile(self, q: float) -> float | None:
        if self.exact is not None:
            return self.exact.percentile(q)
        assert self.sketch is not None
        return self.sketch.percentile(q)

    def stored(self) -> tuple[np.ndarray | None, np.ndarray | None, int | None,
                              np.ndarray | None]:
        """(values, counts, zeros, buckets) as stored: the exact values (unsorted, counts
        None when each stands for itself once: no sort to write them), or the sketch's
        counts, zero count and buckets."""
        if self.exact is not None:
            values, counts = self.exact.joined()
            return values, counts, None, None
        assert self.sketch is not None
        return None, self.sketch.counts, self.sketch.zeros, self.sketch.buckets

    @classmethod
    def from_stored(cls, values: np.ndarray | None, counts: np.ndarray | None,
                    zeros: int | None, buckets: np.ndarray | None) -> Distribution:
        """Inverse of `stored`."""
        if buckets is None:
            return cls(exact=ValueCounts([] if values is None else values, counts))
        return cls(sketch=LogSketch(zeros or 0, buckets, counts))
