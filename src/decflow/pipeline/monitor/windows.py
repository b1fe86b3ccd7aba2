"""A window's statistics, composed from what the monitor keeps: the records' own statistics
from each partition's piece (in partition-name order) merged with what labels added
(`metrics.production.correctness_stats` of the predictions a label joined). The same
pieces and labels give the same bits whatever order the runs read them in, so labels that
arrive a window late give the same final window metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from decflow.data.records.reader import RecordSpec, segment_column
from decflow.metrics.production import GroupStats, correctness_stats, merge_groups
from decflow.pipeline.monitor.scan import split_key
from decflow.pipeline.production.statistics import SEGMENT_SEPARATOR, Aggregates, aggregates_of


def records_groups(pieces: Sequence[dict[str, GroupStats]], window: str
                   ) -> dict[str, GroupStats]:
    """The records' own statistics of `window`, from the pieces of its partitions."""
    merged: dict[str, GroupStats] = {}
    for piece in pieces:
        mine = {}
        for key, stats in piece.items():
            found, group = split_key(key)
            if found == window:
                mine[group] = stats
        merged = merge_groups(merged, mine)
    return merged


def labelled_groups(predictions: pl.DataFrame, spec: RecordSpec, n_bins: int
                    ) -> dict[str, GroupStats]:
    """What labels added to the groups of the predictions given (those a label joined),
    for the whole window and each segment value. Sorted by id hash first: the same set of
    predictions gives the same float sums in any arrival order."""
    joined = predictions.filter(pl.col("labelled")).sort("h")
    if joined.height == 0:
        return {}
    confidence = joined["confidence"].to_numpy()
    correct = joined["correct"].to_numpy() == 1
    out = correctness_stats(confidence, correct, np.zeros(joined.height, dtype=np.int64),
                            [""], n_bins)
    for key in spec.segments:
        tokens = joined[segment_column(key)]
        names = tokens.unique(maintain_order=True).to_list()
        groups = tokens.replace_strict(names, list(range(len(names))),
                                       return_dtype=pl.Int64).to_numpy()
        out.update(correctness_stats(confidence, correct, groups,
                                     [f"{key}{SEGMENT_SEPARATOR}{t}" for t in names], n_bins))
    return out


def window_aggregates(window: str, pieces: Sequence[dict[str, GroupStats]],
                      predictions: pl.DataFrame, spec: RecordSpec, n_bins: int, *,
                      source: str, digest: str, files: list[str]) -> Aggregates:
    """The window's merged statistics as the check's summary reads them."""
    mine = predictions.filter(pl.col("window") == window)
    merged = merge_groups(records_groups(pieces, window),
                          labelled_groups(mine, spec, n_bins))
    return aggregates_of(merged, spec, source, digest, files)
