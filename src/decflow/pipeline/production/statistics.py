"""The production check's statistics: a batch of records reduced to mergeable statistics
(`metrics.production.GroupStats`) for the whole batch and every segment value, and the
merged statistics of a source (`Aggregates`), whatever ran the units."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.data.records import RecordSpec, segment_column
from decflow.errors import DatasetError
from decflow.metrics.production import (
    GroupStats,
    group_ids,
    grouped_stats,
    merge_groups,
    record_columns,
)

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

# A group's key: "" for every record, `<segment key>\x1f<value token>` for a segment value.
SEGMENT_SEPARATOR = "\x1f"


@dataclass
class Aggregates:
    """Merged statistics of a record source (the `aggregates` stage's output)."""

    path: str
    hash: str
    files: list[str]
    overall: GroupStats
    segments: dict[str, dict[str, GroupStats]] = field(default_factory=dict)
    records: list[dict[str, Any]] | None = None  # kept while small enough to inline


def binning(contract: Contract) -> tuple[int, float | None]:
    """(calibration bins, confidence threshold): the contract's settings statistics use."""
    evaluation = contract.evaluation
    return int(evaluation.calibration_bins), evaluation.confidence_threshold


@dataclass(frozen=True)
class BatchStats:
    """Statistics of one batch, with the contract's settings taken out (it pickles, for
    workers): the whole batch under `""`, each segment value under `<key>\\x1f<token>`."""

    spec: RecordSpec
    n_bins: int
    threshold: float | None

    @classmethod
    def of(cls, spec: RecordSpec, contract: Contract) -> BatchStats:
        return cls(spec, *binning(contract))

    def __call__(self, table: pl.DataFrame) -> dict[str, GroupStats]:
        if table.height == 0:
            return {}
        spec, n_bins = self.spec, self.n_bins
        columns = record_columns(table, spec.labels, n_bins, self.threshold)
        if not spec.segments:
            keys, groups = group_ids(table, None)
            return grouped_stats(columns, keys, groups, n_bins)
        out: dict[str, GroupStats] = {}
        for key in spec.segments:
            keys, groups = group_ids(table, segment_column(key))
            for token, stats in grouped_stats(columns, keys, groups, n_bins).items():
                out[f"{key}{SEGMENT_SEPARATOR}{token}"] = stats
        # Every record is in exactly one group of a key: the whole batch is their merge
        # (exact, like every merge), not a second pass over the records.
        first = spec.segments[0]
        overall: dict[str, GroupStats] = {}
        for group, stats in out.items():
            if group.partition(SEGMENT_SEPARATOR)[0] == first:
                overall = merge_groups(overall, {"": stats})
        return {**overall, **out}


def aggregates_of(
    merged: dict[str, GroupStats], spec: RecordSpec, path: str, digest: str, files: list[str]
) -> Aggregates:
    """The merged groups of a source as its `Aggregates` (exit 2 when it held no record)."""
    if "" not in merged:
        raise DatasetError(f"{path}: production dataset contains no records")
    segments: dict[str, dict[str, GroupStats]] = {key: {} for key in spec.segments}
    for group, stats in merged.items():
        if group:
            key, _, token = group.partition(SEGMENT_SEPARATOR)
            segments[key][token] = stats
    return Aggregates(path, digest, files, merged[""], segments)
