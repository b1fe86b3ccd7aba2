"""Production metrics as mergeable sufficient statistics (DecGuard 0.1 `check` semantics).

Each partition of normalized records is reduced to one `GroupStats` per group (the whole
partition, or one per segment value): counts, exact float sums (`partial_sums`), per-bin
counts and sums, and a `Distribution` per percentile column (exact up to `EXACT_LIMIT`
values, a deterministic log-bucket sketch beyond: `metrics.quantiles`). Statistics of
different partitions merge by addition, so the final numbers do not depend on how the
records were split — one machine or many give the same bits, and DecGuard's single pass
where the percentiles are exact. The exception is the SmoothECE grid (`smooth`, float node
sums, `decflow.metrics.smooth_ece`): reassociated float sums, equal to one pass within
1e-12 relative.

Populations: the `outcomes` and ECE use records whose correctness is known (an `outcome`
or `outcome_correct`); Brier and NLL need an `outcome` label; the confidence histogram,
mean, percentiles and threshold coverage use every record; the abstention and human-review
rates use records with an `action`; the fallback rate uses records whose `fallback` or
`action` is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from decflow.contracts.gates import PRODUCTION_GATES
from decflow.metrics.golden_metrics import NLL_FLOOR, calibration_bin_index, reliability_from_bins
from decflow.metrics.numeric import row_sums
from decflow.metrics.partial_sums import group_sums, to_float
from decflow.metrics.quantiles import EXACT_LIMIT, RELATIVE_ERROR, Distribution
from decflow.metrics.smooth_ece import PRODUCTION_NODES, CalibrationGrid, grouped_grids

Metrics = dict[str, Any]


@dataclass
class GroupStats:
    """Sufficient statistics of one group of records. Sums are exact (see `partial_sums`)."""

    total: int = 0
    with_outcome: int = 0
    with_correctness: int = 0
    with_action: int = 0
    with_fallback: int = 0
    with_latency: int = 0
    with_cost: int = 0
    n_correct: int = 0
    bin_count: list[int] = field(default_factory=list)
    bin_correct: list[int] = field(default_factory=list)
    bin_confidence: list[int] = field(default_factory=list)
    brier_sum: int = 0
    nll_sum: int = 0
    confidence_sum: int = 0
    histogram: list[int] = field(default_factory=list)
    confidence: Distribution = field(default_factory=Distribution)
    covered: int = 0
    n_abstain: int = 0
    n_human_review: int = 0
    n_fallback: int = 0
    latency_sum: int = 0
    latency: Distribution = field(default_factory=Distribution)
    cost_sum: int = 0
    cost: Distribution = field(default_factory=Distribution)
    smooth: CalibrationGrid | None = None  # records with known correctness

    def merge(self, other: GroupStats) -> GroupStats:
        merged = GroupStats()
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "smooth":
                value: Any = theirs if mine is None else mine if theirs is None else (
                    mine.merge(theirs))
            elif isinstance(mine, Distribution):
                value = mine.merge(theirs)
            elif isinstance(mine, list):
                value = [a + b for a, b in zip(mine, theirs, strict=True)] if mine else theirs
            else:
                value = mine + theirs
            setattr(merged, f.name, value)
        return merged


def merge_groups(
    left: dict[str, GroupStats], right: dict[str, GroupStats]
) -> dict[str, GroupStats]:
    """Merge per-group statistics of two partitions (groups present in either)."""
    merged = dict(left)
    for key, stats in right.items():
        merged[key] = merged[key].merge(stats) if key in merged else stats
    return merged


# Up to this many groups, a flag is counted per group through each group's mask (a few
# vectorized boolean passes) rather than by gathering its rows' group numbers.
_MASKED_GROUPS = 16


def _per_group(mask: npt.NDArray[np.bool_], groups: np.ndarray, n: int,
               members: list[npt.NDArray[np.bool_]] | None) -> list[int]:
    if n == 1:
        return [int(np.count_nonzero(mask))]
    if members is not None:
        return [int(np.count_nonzero(mask & member)) for member in members]
    counts: list[int] = np.bincount(groups[mask], minlength=n).tolist()
    return counts


def _counts_by(groups: np.ndarray, bins: np.ndarray, n_groups: int, n_bins: int) -> np.ndarray:
    flat = np.bincount(groups * n_bins + bins, minlength=n_groups * n_bins)
    return flat.reshape(n_groups, n_bins)


def _distributions(values: np.ndarray, groups: np.ndarray, n_groups: int) -> list[Distribution]:
    """Each group's values as a `Distribution`: the values themselves for groups of at most
    `EXACT_LIMIT` values, log-bucket sketches beyond."""
    sizes = np.bincount(groups, minlength=n_groups)
    out = [Distribution() for _ in range(n_groups)]
    if n_groups == 1:
        return [Distribution.of(values)] if values.size else out
    # a stable sort of small integers is a radix sort in numpy
    small = groups.astype(np.int16) if n_groups < 1 << 15 else groups
    order = np.argsort(small, kind="stable")
    ends = np.cumsum(sizes)
    for g in np.flatnonzero(sizes).tolist():
        part = values[order[ends[g] - sizes[g]:ends[g]]]
        out[g] = Distribution.of(part)
    return out


@dataclass(frozen=True)
class RecordColumns:
    """Per-record inputs of the statistics, computed once per batch and shared by every
    grouping (the whole batch and each segment key)."""

    n: int
    confidence: np.ndarray
    bins: np.ndarray
    known: np.ndarray  # correctness known
    correct: np.ndarray  # known and correct
    labelled: np.ndarray  # rows (indices) with an outcome label
    brier_terms: np.ndarray  # per labelled row
    nll_terms: np.ndarray  # per labelled row
    flags: dict[str, np.ndarray]  # boolean columns counted per group
    latency_rows: np.ndarray
    latency: np.ndarray
    cost_rows: np.ndarray
    cost: np.ndarray


def record_columns(
    table: pl.DataFrame, labels: tuple[str, ...], n_bins: int, threshold: float | None
) -> RecordColumns:
    """Everything the statistics need from a normalized records table, as numpy arrays."""
    probs = np.column_stack(
        [table["probabilities"].struct.field(lb).to_numpy() for lb in labels]
    ).astype(np.float64)
    confidence = table["confidence"].to_numpy().astype(np.float64)
    known = table["outcome_correct"].is_not_null().to_numpy()
    correct = table["outcome_correct"].fill_null(False).to_numpy()
    outcome_index = (
        table["outcome"]
        .replace_strict(list(labels), list(range(len(labels))), default=-1, return_dtype=pl.Int64)
        .fill_null(-1)
        .to_numpy()
        .astype(np.int64)
    )
    rows = np.flatnonzero(outcome_index >= 0)
    outcome_of = outcome_index[rows]
    # each labelled row's squared distances to its outcome's one-hot vector, as
    # (p - one_hot) ** 2 computes them (p - 0 is p) without building the one-hot rows
    squares = probs[rows] ** 2
    squares[np.arange(rows.size), outcome_of] = (probs[rows, outcome_of] - 1.0) ** 2
    action, fallback = table["action"], table["fallback"]
    latency, cost = table["latency_ms"], table["cost"]
    flags = {
        "total": np.ones(table.height, dtype=bool),
        "with_outcome": outcome_index >= 0,
        "with_correctness": known,
        "with_action": action.is_not_null().to_numpy(),
        # DecGuard counts a record's fallback as known when `fallback` or `action` is given.
        "with_fallback": (fallback.is_not_null() | action.is_not_null()).to_numpy(),
        "with_latency": latency.is_not_null().to_numpy(),
        "with_cost": cost.is_not_null().to_numpy(),
        "n_correct": known & correct,
        "covered": confidence >= threshold
        if threshold is not None
        else np.zeros(table.height, dtype=bool),
        "n_abstain": (action == "abstain").fill_null(False).to_numpy(),
        "n_human_review": (action == "human_review").fill_null(False).to_numpy(),
        "n_fallback": ((fallback == True) | (action == "fallback"))  # noqa: E712
        .fill_null(False)
        .to_numpy(),
    }
    return RecordColumns(
        n=table.height,
        confidence=confidence,
        bins=calibration_bin_index(confidence, n_bins),
        known=known,
        correct=known & correct,
        labelled=rows,
        brier_terms=row_sums(squares),
        nll_terms=-np.log(np.maximum(probs[rows, outcome_of], NLL_FLOOR)),
        flags=flags,
        latency_rows=np.flatnonzero(flags["with_latency"]),
        latency=latency.drop_nulls().to_numpy().astype(np.float64),
        cost_rows=np.flatnonzero(flags["with_cost"]),
        cost=cost.drop_nulls().to_numpy().astype(np.float64),
    )


def group_ids(table: pl.DataFrame, column: str | None) -> tuple[list[str], np.ndarray]:
    """Group keys (in first-seen order) and each record's group number; one group `""`
    without a column."""
    if column is None:
        return [""], np.zeros(table.height, dtype=np.int64)
    values = table[column]
    keys = values.unique(maintain_order=True).to_list()
    ids = values.replace_strict(keys, list(range(len(keys))), return_dtype=pl.Int64)
    return keys, ids.to_numpy()


def _rows_of(groups: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The group numbers of some rows (given by index; all of them: no copy)."""
    return groups if rows.size == groups.size else groups[rows]


def grouped_stats(
    columns: RecordColumns, keys: list[str], groups: np.ndarray, n_bins: int
) -> dict[str, GroupStats]:
    """One `GroupStats` per key from per-record columns and group numbers."""
    n = len(keys)
    c = columns
    bins = c.bins
    # the rows with known correctness (usually all of them: no copies then)
    every = bool(c.known.all())
    k_groups, k_bins, k_confidence = (
        (groups, bins, c.confidence) if every else (groups[c.known], bins[c.known],
                                                    c.confidence[c.known]))
    hist = _counts_by(groups, bins, n, n_bins)
    cal_bins = hist if every else _counts_by(k_groups, k_bins, n, n_bins)
    cal_correct = _counts_by(groups[c.correct], bins[c.correct], n, n_bins)
    cal_sums = group_sums(k_confidence, k_groups * n_bins + k_bins, n * n_bins)
    labelled = _rows_of(groups, c.labelled)
    brier = group_sums(c.brier_terms, labelled, n)
    nll = group_sums(c.nll_terms, labelled, n)
    # exact sums add up exactly: with every row known, a group's sum is its bins' sums
    conf_sum = ([sum(cal_sums[i * n_bins:(i + 1) * n_bins]) for i in range(n)] if every
                else group_sums(c.confidence, groups, n))
    lat_groups, cost_groups = _rows_of(groups, c.latency_rows), _rows_of(groups, c.cost_rows)
    lat_sum = group_sums(c.latency, lat_groups, n)
    cost_sum = group_sums(c.cost, cost_groups, n)
    k_correct = c.correct if every else c.correct[c.known]
    smooth = grouped_grids(k_confidence, k_correct.astype(np.float64), k_groups, n,
                           PRODUCTION_NODES)
    conf_counts = _distributions(c.confidence, groups, n)
    lat_counts = _distributions(c.latency, lat_groups, n)
    cost_counts = _distributions(c.cost, cost_groups, n)
    members = [groups == g for g in range(n)] if 1 < n <= _MASKED_GROUPS else None
    per = {name: _per_group(flag, groups, n, members) for name, flag in c.flags.items()}
    out: dict[str, GroupStats] = {}
    for i, key in enumerate(keys):
        counts: dict[str, Any] = {name: values[i] for name, values in per.items()}
        stats = GroupStats(**counts)
        stats.bin_count = cal_bins[i].tolist()
        stats.bin_correct = cal_correct[i].tolist()
        stats.bin_confidence = cal_sums[i * n_bins : (i + 1) * n_bins]
        stats.histogram = hist[i].tolist()
        stats.brier_sum, stats.nll_sum, stats.confidence_sum = brier[i], nll[i], conf_sum[i]
        stats.latency_sum, stats.cost_sum = lat_sum[i], cost_sum[i]
        stats.confidence, stats.latency, stats.cost = conf_counts[i], lat_counts[i], cost_counts[i]
        stats.smooth = smooth[i]
        out[key] = stats
    return out


def correctness_stats(
    confidence: np.ndarray, correct: np.ndarray, groups: np.ndarray, keys: list[str],
    n_bins: int,
) -> dict[str, GroupStats]:
    """What learning the correctness of records already counted adds to their groups'
    statistics (a monitor's labels arriving after the decisions): the correctness counts,
    reliability bins and SmoothECE grid, nothing else (`total` and every other count 0), so
    merging them into the records' own statistics gives what the records would have given
    with `outcome_correct` set. One entry per key that has a record."""
    n = len(keys)
    bins = calibration_bin_index(confidence, n_bins)
    right = correct.astype(bool)
    counts = _counts_by(groups, bins, n, n_bins)
    rights = _counts_by(groups[right], bins[right], n, n_bins)
    sums = group_sums(confidence, groups * n_bins + bins, n * n_bins)
    grids = grouped_grids(confidence, right.astype(np.float64), groups, n, PRODUCTION_NODES)
    sizes = np.bincount(groups, minlength=n)
    out: dict[str, GroupStats] = {}
    for i in np.flatnonzero(sizes).tolist():
        out[keys[i]] = GroupStats(
            with_correctness=int(sizes[i]), n_correct=int(rights[i].sum()),
            bin_count=counts[i].tolist(), bin_correct=rights[i].tolist(),
            bin_confidence=sums[i * n_bins:(i + 1) * n_bins], histogram=[0] * n_bins,
            smooth=grids[i])
    return out


def partition_stats(
    table: pl.DataFrame,
    labels: tuple[str, ...],
    n_bins: int,
    threshold: float | None,
    group_column: str | None = None,
) -> dict[str, GroupStats]:
    """Statistics of a normalized records table, per value of `group_column` (a segment
    token column) or for the whole table under the key `""`."""
    if table.height == 0:
        return {}
    keys, groups = group_ids(table, group_column)
    return grouped_stats(record_columns(table, labels, n_bins, threshold), keys, groups, n_bins)


_EXACT = ("brier_sum", "nll_sum", "confidence_sum", "latency_sum", "cost_sum")
_GRID_SUMS = ("mass", "residual")
_DISTRIBUTIONS = ("confidence", "latency", "cost")
_COUNT_LISTS = ("bin_count", "bin_correct", "histogram")


def stats_frame(groups: dict[str, GroupStats]) -> pl.DataFrame:
    """Per-group statistics as a table, one row per group (the stored form). Exact sums
    are big integers, stored as decimal text so that Parquet keeps every digit;
    distributions as `Distribution.stored` columns, built from numpy through Arrow (a
    group can hold `EXACT_LIMIT` values per distribution: never Python lists of them)."""
    stats = list(groups.values())
    columns: dict[str, pl.Series | pa.Array] = {"group": pl.Series(list(groups), dtype=pl.String)}
    for f in fields(GroupStats):
        values = [getattr(s, f.name) for s in stats]
        if f.name == "smooth":
            for part in _GRID_SUMS:
                columns[f"smooth_{part}"] = _list_array(
                    [None if v is None else getattr(v, part) for v in values], pa.float64())
        elif f.name in _DISTRIBUTIONS:
            stored = [v.stored() for v in values]
            columns[f"{f.name}_values"] = _list_array([s[0] for s in stored], pa.float64())
            columns[f"{f.name}_counts"] = _list_array([s[1] for s in stored], pa.int64())
            columns[f"{f.name}_zeros"] = pl.Series([s[2] for s in stored], dtype=pl.Int64)
            columns[f"{f.name}_buckets"] = _list_array([s[3] for s in stored], pa.int64())
        elif f.name in _EXACT:
            columns[f.name] = pl.Series([str(v) for v in values], dtype=pl.String)
        elif f.name == "bin_confidence":
            columns[f.name] = pl.Series([[str(v) for v in row] for row in values],
                                        dtype=pl.List(pl.String))
        elif f.name in _COUNT_LISTS:
            columns[f.name] = pl.Series(values, dtype=pl.List(pl.Int64))
        else:
            columns[f.name] = pl.Series(values, dtype=pl.Int64)
    # a table, not arrays: polars converts an Arrow array through pyarrow.compute, whose
    # import alone costs 25 ms
    lists = pl.from_arrow(pa.table({k: v for k, v in columns.items()
                                    if isinstance(v, pa.Array)}))
    assert isinstance(lists, pl.DataFrame)
    return pl.DataFrame([lists[name] if isinstance(column, pa.Array) else column.alias(name)
                         for name, column in columns.items()])


def _list_array(arrays: list[np.ndarray | None], kind: pa.DataType) -> pa.Array:
    """A list array from numpy arrays (None: a null row), through Arrow's offsets."""
    starts = np.cumsum([0] + [0 if a is None else a.size for a in arrays]).tolist()
    # a null start offset makes its row null
    offsets = pa.array([None if a is None else start
                        for a, start in zip(arrays, starts[:-1], strict=True)]
                       + starts[-1:], type=pa.int64())
    flat = [a for a in arrays if a is not None and a.size]
    values = arrow_array(np.concatenate(flat) if flat else np.empty(0), kind)
    return pa.LargeListArray.from_arrays(offsets, values)


def arrow_array(values: np.ndarray, kind: pa.DataType | None = None) -> pa.Array:
    """A flat numeric Arrow array over a numpy array's buffer (converted to `kind` first).
    Not `pa.array(values)`: for an ndarray that imports numpy.ma (11 ms, on the thread
    that publishes while the records are read) to ask whether it is masked."""
    kind = kind or pa.from_numpy_dtype(values.dtype)
    data = np.ascontiguousarray(values, dtype=kind.to_pandas_dtype())
    return pa.Array.from_buffers(kind, data.size, [None, pa.py_buffer(data)])


def stats_from_frame(frame: pl.DataFrame) -> dict[str, GroupStats]:
    """Inverse of `stats_frame`."""
    out: dict[str, GroupStats] = {}
    for i, group in enumerate(frame["group"].to_list()):
        stats = GroupStats()
        for f in fields(stats):
            if f.name == "smooth":
                sums = [_array(frame[f"smooth_{part}"], i) for part in _GRID_SUMS]
                if sums[0] is not None:
                    stats.smooth = CalibrationGrid(sums[0].size, *sums)  # type: ignore[arg-type]
            elif f.name in _DISTRIBUTIONS:
                values, counts, buckets = (
                    _array(frame[f"{f.name}_{part}"], i) for part in ("values", "counts",
                                                                      "buckets")
                )
                zeros = frame[f"{f.name}_zeros"][i]
                setattr(stats, f.name, Distribution.from_stored(values, counts, zeros, buckets))
            elif f.name in _EXACT:
                setattr(stats, f.name, int(frame[f.name][i]))
            elif f.name == "bin_confidence":
                stats.bin_confidence = [int(v) for v in frame[f.name][i]]
            elif f.name in _COUNT_LISTS:
                setattr(stats, f.name, frame[f.name][i].to_list())
            else:
                setattr(stats, f.name, int(frame[f.name][i]))
        out[group] = stats
    return out


def _array(column: pl.Series, row: int) -> np.ndarray | None:
    cell = column[row]
    return None if cell is None else cell.to_numpy()


def sketched(stats: GroupStats) -> list[str]:
    """The metrics of a group whose percentiles come from a sketch (more than
    `EXACT_LIMIT` values), by report name."""
    names = {"confidence": "confidence", "latency": "latency_ms", "cost": "cost"}
    return [names[name] for name in _DISTRIBUTIONS if not getattr(stats, name).is_exact]


def percentile_method(sketched_metrics: list[str]) -> dict[str, Any]:
    """The report's statement of how percentiles were computed."""
    return {
        "exact_up_to": EXACT_LIMIT,
        "sketch": "log-bucket (DDSketch mapping), deterministic and mergeable",
        "relative_error": RELATIVE_ERROR,
        "sketched": sketched_metrics,
    }


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _reliability(stats: GroupStats) -> tuple[list[dict[str, Any]], float | None]:
    counts = stats.bin_count
    means = [
        to_float(total) / count if count else None
        for total, count in zip(stats.bin_confidence, counts, strict=True)
    ]
    return reliability_from_bins(counts, means, stats.bin_correct)


def _spread(n: int, exact_sum: int, values: Distribution, *, total: bool) -> Metrics:
    return {
        "n": n,
        "mean": to_float(exact_sum) / n if n else None,
        "p95": values.percentile(95),
        "total": (to_float(exact_sum) if n else None) if total else None,
    }


def production_metrics(stats: GroupStats, n_bins: int, threshold: float | None) -> Metrics:
    """The report's `metrics` object (DecGuard 0.1 keys and order)."""
    accuracy = _ratio(stats.n_correct, stats.with_correctness)
    reliability, ece = _reliability(stats)
    metrics: Metrics = {
        "counts": {
            "total": stats.total,
            "with_outcome": stats.with_outcome,
            "with_correctness": stats.with_correctness,
            "with_action": stats.with_action,
            "with_fallback": stats.with_fallback,
            "with_latency": stats.with_latency,
            "with_cost": stats.with_cost,
        },
        "outcomes": {
            "n": stats.with_correctness,
            "accuracy": accuracy,
            "error_rate": None if accuracy is None else 1.0 - accuracy,
        },
        "calibration": {
            "n": stats.with_correctness,
            "ece": ece,
            "n_label_outcomes": stats.with_outcome,
            "brier": to_float(stats.brier_sum) / stats.with_outcome if stats.with_outcome else None,
            "nll": to_float(stats.nll_sum) / stats.with_outcome if stats.with_outcome else None,
            "bins": n_bins,
            "reliability": reliability,
        },
        "confidence": {
            "n": stats.total,
            "mean": to_float(stats.confidence_sum) / stats.total if stats.total else None,
            "p50": stats.confidence.percentile(50),
            "p95": stats.confidence.percentile(95),
            "histogram": list(stats.histogram),
        },
    }
    if threshold is not None:
        metrics["threshold"] = {
            "threshold": float(threshold),
            "n": stats.total,
            "coverage": _ratio(stats.covered, stats.total),
        }
    metrics["routing"] = {
        "n_actions": stats.with_action,
        "abstention_rate": _ratio(stats.n_abstain, stats.with_action),
        "human_review_rate": _ratio(stats.n_human_review, stats.with_action),
        "n_fallback": stats.with_fallback,
        "fallback_rate": _ratio(stats.n_fallback, stats.with_fallback),
    }
    metrics["latency_ms"] = _spread(
        stats.with_latency, stats.latency_sum, stats.latency, total=False
    )
    metrics["cost"] = _spread(stats.with_cost, stats.cost_sum, stats.cost, total=True)
    return metrics


def production_value(metrics: Metrics, name: str) -> float | None:
    """The value a production gate reads (None when its section or value is missing), where
    the gate's registry entry says it sits."""
    section, key = next(entry.path for entry in PRODUCTION_GATES.entries()
                        if entry.metric == name and entry.path is not None)
    values = metrics.get(section)
    return None if values is None else values.get(key)


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def drift(current: Metrics, baseline: Metrics | None) -> dict[str, float | None]:
    """Drift of the current records against a baseline's metrics (all null without one).

    TV distance is half the L1 distance between the two confidence histograms as shares."""
    if baseline is None:
        return {
            "confidence_mean_delta": None,
            "confidence_tv_distance": None,
            "accuracy_drop": None,
            "ece_increase": None,
        }
    now, then = current["confidence"], baseline["confidence"]
    tv = None
    if now["n"] and then["n"] and len(now["histogram"]) == len(then["histogram"]):
        gaps = [
            abs(a / now["n"] - b / then["n"])
            for a, b in zip(now["histogram"], then["histogram"], strict=True)
        ]
        tv = math.fsum(gaps) / 2
    return {
        "confidence_mean_delta": _difference(now["mean"], then["mean"]),
        "confidence_tv_distance": tv,
        "accuracy_drop": _difference(
            baseline["outcomes"]["accuracy"], current["outcomes"]["accuracy"]
        ),
        "ece_increase": _difference(
            current["calibration"]["ece"], baseline["calibration"]["ece"]
        ),
    }
