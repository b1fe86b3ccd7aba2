"""The production check, partition by partition: `records` per unit, then `aggregates`.

`records` (one per unit of `data.record_units`, independent, so a Dask fan-out runs them
on different workers, each reading only its files or row groups): validate every record
and reduce the unit to mergeable statistics per group, plus the 64-bit hashes of its ids.
Nothing else of the records is kept — in the store a unit is one small statistics part and
its id hashes split by their top 4 bits into `ID_BUCKETS` parts (delta-encoded, ≈5 bytes a
record), never a copy of the rows.

`aggregates` merges the units: ids are checked across all of them one hash bucket at a
time, statistics merge by addition (the same bits in any split or order). When a unit
found a bad record or two ids share a hash, the records up to there are read again in file
order by `RecordReader`, which reports exactly what a single pass reports: the first bad
record or repeated id in file order (a repeated hash without a repeated id is a collision
and passes). Unusable segment values are reported after that, first unit first.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from decflow.data.record_units import ScannedFile, Unit, plan_units, scan_source, suffix
from decflow.data.records import RecordReader, RecordSpec, source_hash
from decflow.errors import DatasetError
from decflow.metrics.production import (
    GroupStats,
    arrow_array,
    merge_groups,
    stats_frame,
    stats_from_frame,
)
from decflow.workers.command import spawn_isolated

if TYPE_CHECKING:
    from decflow.pipeline.production.statistics import BatchStats
    from decflow.store.store import Manifest, Part, Store

ID_BUCKETS = 16
_BUCKET_SHIFT = np.uint64(60)



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


@dataclass(frozen=True)
class SourcePlan:
    """A record source, hashed, counted and split into units."""

    path: str  # as the report shows it
    files: list[str]
    digests: list[str]
    units: list[Unit]

    @property
    def hash(self) -> str:
        return source_hash(self.files, self.digests)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "digests": self.digests,
                "units": [u.to_dict() for u in self.units]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourcePlan:
        return cls(data["path"], list(data["files"]), list(data["digests"]),
                   [Unit.from_dict(u) for u in data["units"]])


def plan_source(source: str | Path | Sequence[str | Path], shown_path: str | None = None,
                threads: int | None = None, *, absolute: bool = False) -> SourcePlan:
    """List, hash and count the files of a source and split them into units (`absolute`:
    local files by absolute path, for workers that run elsewhere)."""
    files, scanned = scan_source(source, absolute=absolute, threads=threads)
    return plan_scanned(shown_path or str(source), files, scanned)


def plan_scanned(shown_path: str, files: list[str], scanned: list[ScannedFile]) -> SourcePlan:
    """The plan of files already scanned (`record_units.scan_source`)."""
    return SourcePlan(shown_path, files, [s.digest for s in scanned], plan_units(scanned))


def aggregate_unit(unit: Unit, spec: RecordSpec, batch_stats: BatchStats) -> UnitAggregates:
    """Read and validate one unit, batch by batch, into its statistics and id hashes (units
    are read side by side: in a pool, or as tasks on workers)."""
    reader = RecordReader((), spec, parts=unit.parts, offset=unit.offset, texts=False,
                          beside=True)
    merged: dict[str, GroupStats] = {}
    try:
        for batch in reader.unit_batches():
            merged = merge_groups(merged, batch_stats(batch.table))
    except DatasetError as exc:
        return UnitAggregates(unit, reader.n_records - unit.offset, str(exc))
    n_records = reader.n_records - unit.offset
    if n_records != unit.n_records:
        files = ", ".join(dict.fromkeys(p.path for p in unit.parts))
        return UnitAggregates(unit, n_records, f"{files}: changed while the check ran "
                              f"({unit.n_records} records planned, {n_records} read); run "
                              "it again")
    return UnitAggregates(unit, n_records, None, reader.segment_problems(), merged,
                          reader.id_hashes())


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
    return UnitAggregates(unit, n_records, None, problems, stats,
                          np.sort(np.concatenate(hashes), kind="stable"))


# From this many records on, Parquet and JSON-list units are read in worker processes: their
# batches are many short numpy and polars calls, so threads share one core's worth of the
# GIL. Below it, starting the processes (imports, ≈0.5 CPU s each) costs more than it
# saves. JSONL units always use threads: Arrow's parser, most of their work, runs without
# the GIL (1M records: 5.1 CPU s in threads, 5.7 in processes, the same wall time).
PROCESS_RECORDS = 1_000_000


def in_processes(units: Sequence[Unit]) -> bool:
    """Whether reading these units is worth worker processes (see `PROCESS_RECORDS`)."""
    jsonl = all(suffix(part.path) == ".jsonl" for unit in units for part in unit.parts)
    return not jsonl and sum(u.n_records for u in units) >= PROCESS_RECORDS


T = TypeVar("T")
R = TypeVar("R")


def spawn_is_safe() -> bool:
    """Whether worker processes may be spawned: each imports the parent's main module
    again, which is only harmless when there is none (`python -c`, a console) or it is one
    of decflow's entry points (they run only under `__name__ == "__main__"`). A user's
    script calling the SDK may do its work unguarded, so it gets threads."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return bool(spec.name == "decflow.__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.basename(path) == "decflow"


def in_parallel(fn: Callable[..., R], items: Sequence[T], *args: Any,
                processes: bool) -> Iterator[R]:
    """`fn(item, *args)` for every item on all cores, in item order: worker processes
    (spawned: polars' threads do not survive a fork) or threads. `fn` and its arguments
    must pickle for processes."""
    workers = max(1, min(os.cpu_count() or 1, len(items)))
    if processes and workers > 1 and spawn_is_safe():
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            with spawn_isolated():  # map starts the workers: -P -s, as every child
                results = pool.map(fn, items, *(repeat(a) for a in args))
            yield from results
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(lambda item: fn(item, *args), items)


def aggregate_units(
    units: Sequence[Unit], spec: RecordSpec, batch_stats: BatchStats,
    progress: Callable[[int], None] | None = None,
) -> list[UnitAggregates]:
    """`aggregate_unit` of every unit on all cores, in unit order (`batch_stats` must
    pickle)."""
    processes = in_processes(units)
    done = 0
    results: list[UnitAggregates] = []
    for result in in_parallel(aggregate_unit, units, spec, batch_stats, processes=processes):
        results.append(result)
        done += result.n_records
        if progress:
            progress(done)
    return results


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


def merge_in_memory(
    results: Sequence[UnitAggregates], spec: RecordSpec
) -> dict[str, GroupStats]:
    """`merge_units` of results held in this process."""
    buckets = [split_buckets(r.id_hashes) for r in results if r.id_hashes is not None]
    return merge_units(
        [r.unit for r in results], spec, [r.error for r in results],
        [r.segment_problems for r in results], lambda: [r.stats for r in results],
        lambda: any_repeats(lambda b: [split[b] for split in buckets]),
    )


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


# -- the same through the store --------------------------------------------------------------


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
        stats = store.write_part(f"{prefix}/part-00000.parquet", stats_frame(result.stats))
        return [stats, *ids.result()]


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
    stats_part = next(p for p in manifest.parts if p.path.endswith("/part-00000.parquet"))
    return stats_from_frame(store.read_part(stats_part))


def stored_bucket(store: Store, manifest: Manifest, b: int) -> list[np.ndarray]:
    """A stored unit's id hashes of bucket `b` (none, or one array as int64)."""
    name = f"/ids-{b:02d}.parquet"
    return [store.read_part(p)["h"].to_numpy() for p in manifest.parts if p.path.endswith(name)]


def stored_repeats(store: Store, manifests: Sequence[Manifest]) -> bool:
    """Whether two ids of the stored units share a hash, one bucket in memory at a time."""
    return any_repeats(lambda b: [a for m in manifests for a in stored_bucket(store, m, b)])
