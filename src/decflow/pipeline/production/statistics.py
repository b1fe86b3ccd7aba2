"""The production check's statistics: records reduced to mergeable statistics
(`metrics.production.GroupStats`) for the whole input and every segment value, a unit at a
time, and merged.

A unit (`data.records.units`) is read and validated batch by batch into its statistics per
group and the 64-bit hashes of its ids; nothing else of the records is kept. In the store
a unit is one small statistics part and its id hashes split by their top 4 bits into
`ID_BUCKETS` parts (delta-encoded, ≈5 bytes a record), never a copy of the rows.

Merging checks ids across all units one hash bucket at a time; statistics merge by
addition (the same bits in any split or order). When a unit found a bad record or two ids
share a hash, the records up to there are read again in file order by `RecordReader`, which
reports exactly what a single pass reports: the first bad record or repeated id in file
order (a repeated hash without a repeated id is a collision and passes). Unusable segment
values are reported after that, first unit first.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow import interrupts
from decflow.data.records.reader import RecordReader, RecordSpec, segment_column
from decflow.data.records.units import Unit
from decflow.errors import DatasetError
from decflow.metrics.production import (
    GroupStats,
    arrow_array,
    group_ids,
    grouped_stats,
    merge_groups,
    record_columns,
    stats_frame,
    stats_from_frame,
)

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.store.store import Manifest, Part, Store

ID_BUCKETS = 16
STATS_PART = "part-00000.parquet"  # a unit's statistics
ROWS_PART = "rows.parquet"  # a unit's `BatchStats.rows`, when it keeps any
_BUCKET_SHIFT = np.uint64(60)

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
    workers): the whole batch under `""`, each segment value under `<key>\x1f<token>`,
    each of them crossed with the batch's key prefixes when `prefixes` gives some (a
    monitor's time windows: `<prefix><group>`). The per-record columns are computed once
    for all groups, and the whole batch (of each prefix) is merged from the first segment
    key's groups: every grouping is one more group column, never one more pass."""

    spec: RecordSpec
    n_bins: int
    threshold: float | None

    @classmethod
    def of(cls, spec: RecordSpec, contract: Contract) -> BatchStats:
        return cls(spec, *binning(contract))

    def rows(self, _table: pl.DataFrame) -> pl.DataFrame | None:
        """Per-record rows a unit keeps beside its statistics (a monitor's predictions;
        none for a check)."""
        return None

    def prefixes(self, table: pl.DataFrame) -> tuple[list[str], np.ndarray] | None:
        """The key prefixes every group of this batch is split by — their names and each
        record's prefix number — or None for one, empty, prefix (a check)."""
        return None

    def __call__(self, table: pl.DataFrame) -> dict[str, GroupStats]:
        if table.height == 0:
            return {}
        spec, n_bins = self.spec, self.n_bins
        columns = record_columns(table, spec.labels, n_bins, self.threshold)
        prefixes = self.prefixes(table)
        if not spec.segments:
            keys, groups, _ = crossed(prefixes, [""], np.zeros(table.height, dtype=np.int64))
            return grouped_stats(columns, keys, groups, n_bins)
        overall: dict[str, GroupStats] = {}
        out: dict[str, GroupStats] = {}
        for i, key in enumerate(spec.segments):
            tokens, token_groups = group_ids(table, segment_column(key))
            names = [f"{key}{SEGMENT_SEPARATOR}{token}" for token in tokens]
            keys, groups, owners = crossed(prefixes, names, token_groups)
            stats = grouped_stats(columns, keys, groups, n_bins)
            if i == 0:
                # Every record is in exactly one group of a key: the whole batch is their
                # merge (exact, like every merge), not a second pass over the records.
                for owner, group_stats in zip(owners, stats.values(), strict=True):
                    overall = merge_groups(overall, {owner: group_stats})
            out.update(stats)
        return {**overall, **out}


# Up to this many prefix × group combinations, records are renumbered through a table.
_TABLED_COMBINATIONS = 1 << 20


def crossed(prefixes: tuple[list[str], np.ndarray] | None, keys: list[str],
            groups: np.ndarray) -> tuple[list[str], np.ndarray, list[str]]:
    """Groups split by prefix: (`<prefix><key>` of each combination present, in the order
    the records first show them, each record's combination number, each combination's
    prefix). In that order each prefix's groups come as they would from its records
    alone, so merging them gives the same bits as a pass over those records."""
    if prefixes is None:
        return keys, groups, [""] * len(keys)
    names, numbers = prefixes
    combined = numbers.astype(np.int64) * len(keys) + groups
    present = pl.Series(combined).unique(maintain_order=True).to_numpy()
    if len(names) * len(keys) <= _TABLED_COMBINATIONS:
        renumbered = np.zeros(len(names) * len(keys), dtype=np.int64)
        renumbered[present] = np.arange(present.size)
        inverse = renumbered[combined]
    else:
        inverse = pl.Series(combined).replace_strict(
            present, np.arange(present.size), return_dtype=pl.Int64).to_numpy()
    owners = [names[c // len(keys)] for c in present.tolist()]
    combinations = [owner + keys[c % len(keys)]
                    for owner, c in zip(owners, present.tolist(), strict=True)]
    return combinations, inverse, owners


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


# -- a unit ------------------------------------------------------------------------------


@dataclass
class UnitAggregates:
    """What one unit leaves for the merge (`error` set: nothing else is needed)."""

    unit: Unit
    n_records: int = 0
    error: str | None = None
    segment_problems: dict[str, str] = field(default_factory=dict)
    stats: dict[str, GroupStats] = field(default_factory=dict)
    # sorted; None once dropped (a unit whose hashes are read back from the store)
    id_hashes: np.ndarray | None = field(default_factory=lambda: np.empty(0, dtype=np.uint64))
    rows: pl.DataFrame | None = None  # `BatchStats.rows` of its records, in file order


def aggregate_unit(unit: Unit, spec: RecordSpec, batch_stats: BatchStats) -> UnitAggregates:
    """Read and validate one unit, batch by batch, into its statistics and id hashes (units
    are read side by side: in a pool, or as tasks on workers)."""
    reader = RecordReader((), spec, parts=unit.parts, offset=unit.offset, texts=False,
                          beside=True)
    merged: dict[str, GroupStats] = {}
    rows: list[pl.DataFrame] = []
    try:
        for batch in reader.unit_batches():
            merged = merge_groups(merged, batch_stats(batch.table))
            kept = batch_stats.rows(batch.table)
            if kept is not None:
                rows.append(kept)
    except DatasetError as exc:
        return UnitAggregates(unit, reader.n_records - unit.offset, str(exc))
    n_records = reader.n_records - unit.offset
    if n_records != unit.n_records:
        files = ", ".join(dict.fromkeys(p.path for p in unit.parts))
        return UnitAggregates(unit, n_records, f"{files}: changed while the check ran "
                              f"({unit.n_records} records planned, {n_records} read); run "
                              "it again")
    return UnitAggregates(unit, n_records, None, reader.segment_problems(), merged,
                          reader.id_hashes(), pl.concat(rows) if rows else None)


def combine_pieces(unit: Unit, results: Sequence[UnitAggregates]) -> UnitAggregates:
    """A unit's result from those of its pieces (`Unit.pieces`), in file order: the first
    error, each segment key's first problem, merged statistics and all id hashes."""
    if len(results) == 1:
        return replace(results[0], unit=unit)
    n_records = sum(r.n_records for r in results)
    failed = next((r for r in results if r.error is not None), None)
    if failed is not None:
        return UnitAggregates(unit, n_records, failed.error)
    problems: dict[str, str] = {}
    stats: dict[str, GroupStats] = {}
    for result in results:
        for key, message in result.segment_problems.items():
            problems.setdefault(key, message)
        stats = merge_groups(stats, result.stats)
    hashes = [r.id_hashes for r in results if r.id_hashes is not None]
    rows = [r.rows for r in results if r.rows is not None]
    return UnitAggregates(unit, n_records, None, problems, stats,
                          np.sort(np.concatenate(hashes), kind="stable"),
                          pl.concat(rows) if rows else None)


# -- merging units ------------------------------------------------------------------------


def _has_repeats(sorted_hashes: np.ndarray) -> bool:
    return bool(sorted_hashes.size > 1 and (sorted_hashes[1:] == sorted_hashes[:-1]).any())


def merge_units(
    units: Sequence[Unit],
    spec: RecordSpec,
    errors: Sequence[str | None],
    segment_problems: Sequence[dict[str, str]],
    stats: Callable[[], Sequence[dict[str, GroupStats]]],
    repeated_hash: Callable[[], bool],
) -> dict[str, GroupStats]:
    """The merged statistics of all units (`stats()`, loaded once they are needed), or the
    error a single pass in file order reports. `repeated_hash()` says whether two ids of
    the units share a hash."""
    failed = next((i for i, error in enumerate(errors) if error is not None), None)
    if failed is not None or repeated_hash():
        last = len(units) - 1 if failed is None else failed
        parts = [part for unit in units[: last + 1] for part in unit.parts]
        # Reading in file order raises the first bad record or repeated id, as one pass.
        for _ in RecordReader((), spec, parts=parts).batches():
            pass
        if failed is not None:
            raise DatasetError(str(errors[failed]))
    for key in spec.segments:
        for problems in segment_problems:
            if key in problems:
                raise DatasetError(problems[key])
    merged: dict[str, GroupStats] = {}
    for unit_stats in stats():
        merged = merge_groups(merged, unit_stats)
    return merged


_BUCKET_STARTS = np.arange(ID_BUCKETS, dtype=np.uint64) << _BUCKET_SHIFT


def split_buckets(sorted_hashes: np.ndarray) -> list[np.ndarray]:
    """Sorted 64-bit hashes split by their top 4 bits into `ID_BUCKETS` views, as int64 (one
    bucket shares its sign, so each stays sorted)."""
    bounds = [*np.searchsorted(sorted_hashes, _BUCKET_STARTS).tolist(), sorted_hashes.size]
    signed = sorted_hashes.view(np.int64)
    return [signed[bounds[b] : bounds[b + 1]] for b in range(ID_BUCKETS)]


def any_repeats(buckets: Callable[[int], list[np.ndarray]]) -> bool:
    """Whether two ids share a hash, given each bucket's hashes (one bucket in memory at a
    time: never a second copy of every hash)."""
    for b in range(ID_BUCKETS):
        arrays = buckets(b)
        if arrays and _has_repeats(np.sort(np.concatenate(arrays))):
            return True
    return False


# -- a unit in the store ------------------------------------------------------------------


def write_unit(store: Store, prefix: str, result: UnitAggregates) -> list[Part]:
    """A unit's statistics part and its id hash parts (one per non-empty bucket). The two
    are written side by side (Parquet encoding, hashing and writing release the GIL): the
    last unit's are written while the other core has nothing else to do."""
    hashes = result.id_hashes
    assert hashes is not None

    def id_parts() -> list[Part]:
        return [
            store.write_part_bytes(f"{prefix}/ids-{b:02d}.parquet", _hash_parquet(chunk),
                                   int(chunk.size))
            for b, chunk in enumerate(split_buckets(hashes)) if chunk.size
        ]

    with ThreadPoolExecutor(max_workers=1) as pool:
        ids = pool.submit(id_parts)
        stats = store.write_part(f"{prefix}/{STATS_PART}", stats_frame(result.stats))
        rows = ([] if result.rows is None
                else [store.write_part(f"{prefix}/{ROWS_PART}", result.rows)])
        return [stats, *rows, *interrupts.result(ids)]


def _hash_parquet(hashes: np.ndarray) -> bytes:
    """One bucket's sorted hashes (int64), delta encoded: ≈5 bytes a hash instead of 8."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"h": arrow_array(hashes)}), buffer, compression="zstd", use_dictionary=False,
        column_encoding={"h": "DELTA_BINARY_PACKED"}, write_statistics=False,
    )
    return buffer.getvalue()


def unit_stats(store: Store, manifest: Manifest) -> dict[str, GroupStats]:
    stats_part = next(p for p in manifest.parts if p.path.endswith(f"/{STATS_PART}"))
    return stats_from_frame(store.read_part(stats_part))


def unit_rows(store: Store, manifest: Manifest) -> pl.DataFrame | None:
    """A stored unit's kept rows (`BatchStats.rows`), if it kept any."""
    part = next((p for p in manifest.parts if p.path.endswith(f"/{ROWS_PART}")), None)
    return None if part is None else store.read_part(part)


def stored_bucket(store: Store, manifest: Manifest, b: int) -> list[np.ndarray]:
    """A stored unit's id hashes of bucket `b` (none, or one array as int64)."""
    name = f"/ids-{b:02d}.parquet"
    return [store.read_part(p)["h"].to_numpy() for p in manifest.parts if p.path.endswith(name)]
