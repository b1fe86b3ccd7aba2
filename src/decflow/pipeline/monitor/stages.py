"""The monitor run's stages up to its verdict: `partitions` (the check's `records` units of
the partitions to read, each read once into statistics per window and compact
predictions, then checked and kept as one piece per partition) and `labels` (the labels
partitions to read, kept as compact labels). The verdict stage is `judge.JUDGE`.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from decflow.contracts.sections import Monitor
from decflow.data.records.id_hashes import ID_HASH
from decflow.data.records.reader import RecordReader, RecordSpec
from decflow.data.records.units import Unit, suffix
from decflow.data.records.windows import NO_WINDOW
from decflow.errors import DatasetError
from decflow.metrics.production import GroupStats, merge_groups
from decflow.pipeline.monitor import pieces
from decflow.pipeline.monitor.index import hashes, read_index
from decflow.pipeline.monitor.labels import LABEL_SCHEMA, again, read_labels
from decflow.pipeline.monitor.scan import WindowedStats, prediction_schema, split_key
from decflow.pipeline.monitor.spec import MonitorSpec
from decflow.pipeline.monitor.state import MonitorState
from decflow.pipeline.production.stages import publish_unit, unit_params
from decflow.pipeline.production.statistics import (
    UnitAggregates,
    aggregate_unit,
    any_repeats,
    binning,
    merge_units,
    stored_bucket,
    unit_rows,
    unit_stats,
)
from decflow.pipeline.stage import FanOut, Stage, StageContext, UnitOutcome
from decflow.store.monitors import read_state
from decflow.store.store import Manifest

STAGE_VERSION = "2"  # 2: a unit keeps the predictions of id-less records with an outcome
MonitorContext = StageContext[MonitorSpec]


def settings(context: StageContext[Any]) -> Monitor:
    """The contract's `monitor` section (its defaults when the contract has none)."""
    return context.loaded.contract.monitor or Monitor()


def stored_state(context: MonitorContext) -> MonitorState | None:
    found = read_state(context.store, context.spec.monitor_id)
    return None if found is None else MonitorState.from_dict(found)


def windowed_stats(context: StageContext[Any]) -> WindowedStats:
    contract = context.loaded.contract
    return WindowedStats(RecordSpec.from_contract(contract), *binning(contract),
                         window=settings(context).window)


# -- records: one unit, windowed ------------------------------------------------------------


@dataclass(frozen=True)
class WindowedUnit:
    """A unit of the partitions to read, with the window its records are split by."""

    unit: Unit
    window: str


def unit_of(windowed: WindowedUnit) -> Unit:
    return windowed.unit


def _units(context: MonitorContext) -> list[WindowedUnit]:
    window = settings(context).window
    return [WindowedUnit(unit, window) for unit in context.spec.plan.units]


def _windowed_params(windowed: WindowedUnit) -> dict[str, Any]:
    """What a windowed unit depends on: the check's unit parameters, the window and the id
    hash of its predictions."""
    return {**unit_params(windowed.unit), "window": windowed.window, "id_hash": ID_HASH}


def read_windowed_unit(context: MonitorContext, windowed: WindowedUnit,
                       key: str) -> UnitOutcome:
    """One unit read here (a Prefect task reads only its unit)."""
    stats = windowed_stats(context)
    result = aggregate_unit(windowed.unit, stats.spec, stats)
    return publish_unit(context.store, key, result, keep_ids=False)


def _title(windowed: WindowedUnit) -> str:
    return f"read unit {windowed.unit.index + 1} ({windowed.unit.n_records} records)"


# -- partitions: the units checked and kept per partition ----------------------------------


def _held(outcome: UnitOutcome) -> UnitAggregates | None:
    held = outcome.held
    return held if isinstance(held, UnitAggregates) else None


def _unit_parts(context: MonitorContext, outcome: UnitOutcome
                ) -> tuple[dict[str, GroupStats], pl.DataFrame | None]:
    """A unit's statistics and predictions, as held in this process or stored."""
    held, manifest = _held(outcome), outcome.manifest
    assert manifest is not None
    if held is not None and held.stats:
        return held.stats, held.rows
    return unit_stats(context.store, manifest), unit_rows(context.store, manifest)


def _check_units(context: MonitorContext) -> None:
    """The check's own checks of the records read: the first bad record or repeated id in
    file order, each segment key's first unusable value."""
    spec = RecordSpec.from_contract(context.loaded.contract)
    outcomes = context.unit_outcomes
    published = [o.manifest for o in outcomes if o.manifest is not None]

    def buckets(b: int) -> list[Any]:
        return [a for manifest in published for a in stored_bucket(context.store, manifest, b)]

    merge_units(context.spec.plan.units, spec, [o.error for o in outcomes],
                [dict(m.extra.get("segment_problems") or {}) for m in published],
                list, lambda: any_repeats(buckets))


def _file_starts(units: Sequence[Unit]) -> dict[str, int]:
    """The offset of each file's first record among the records read."""
    starts: dict[str, int] = {}
    for unit in units:
        starts.setdefault(unit.parts[0].path, unit.offset)
    return starts


def _place(path: str, position: int, starts: dict[str, int]) -> str:
    """`<file>: row N` (Parquet) or `record N` (JSONL/JSON: the Nth record, blank lines not
    counted) of the record at 1-based `position` among those read."""
    unit = "row" if suffix(path) == ".parquet" else "record"
    return f"{path}: {unit} {position - starts[path]}"


def _without_timestamp(context: MonitorContext, unit: Unit) -> DatasetError:
    """The error naming the first record of `unit` that has no timestamp."""
    spec = RecordSpec.from_contract(context.loaded.contract)
    reader = RecordReader((), spec, parts=unit.parts, offset=unit.offset, texts=False)
    starts = _file_starts(context.spec.plan.units)
    for batch in reader.unit_batches():
        missing = batch.table.filter(pl.col("timestamp").is_null())
        if missing.height:
            place = _place(str(batch.path), int(missing["position"][0]), starts)
            return DatasetError(
                f"{place}: timestamp: required to put the record in a window "
                f"(monitor.window: {settings(context).window}); give every record a "
                "timestamp, or set monitor.without_timestamp: arrival to window records "
                "without one by the run that reads them")
    return DatasetError(f"{unit.parts[0].path}: a record has no timestamp")


@dataclass
class Piece:
    """One partition as read: what the state records of it."""

    name: str
    path: str
    size: int
    version: str
    digest: str
    key: str
    n_records: int
    windows: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _windows(stats: dict[str, GroupStats]) -> dict[str, int]:
    return {window: s.total for key, s in sorted(stats.items())
            for window, group in [split_key(key)] if group == ""}


def _held_ids(context: MonitorContext) -> np.ndarray:
    """The sorted id hashes of the predictions the monitor holds, but for the partitions
    this run reads again (their ids are theirs to keep)."""
    state = stored_state(context)
    if state is None or not context.spec.to_read:
        return np.empty(0, dtype=np.int64)
    again = {s.key for n, s in state.partitions.items()
             if n in {p.name for p in context.spec.to_read}}
    found = read_index(context.store, state.monitor_id, state.id_index)
    return hashes(found, again)


def _repeated_ids(context: MonitorContext, new: pl.DataFrame, held: np.ndarray,
                  name: str) -> None:
    """An id the monitor already holds a prediction of (from another partition) is the
    error a check gives for a repeated id (a record without an id repeats none)."""
    hashes = new["h"].drop_nulls().to_numpy()
    at = np.searchsorted(held, hashes)
    repeated = int((held[np.minimum(at, held.size - 1)] == hashes).sum()) if held.size else 0
    if repeated:
        raise DatasetError(
            f"partition {name}: {repeated} record id(s) were already checked by monitor "
            f"{context.spec.monitor_id} in another partition (a record id must be unique "
            "across the source); remove the repeated records or rewrite the partition")


def _partition_parts(context: MonitorContext, read: list[tuple[Unit, UnitOutcome]],
                     arrival: bool) -> tuple[dict[str, GroupStats], pl.DataFrame]:
    """A partition's statistics per window and its predictions, from its units (records
    without a timestamp: an error, or the run's window)."""
    stats: dict[str, GroupStats] = {}
    rows: list[pl.DataFrame] = []
    for unit, outcome in read:
        own_stats, own_rows = _unit_parts(context, outcome)
        if any(split_key(k)[0] == NO_WINDOW for k in own_stats) and not arrival:
            raise _without_timestamp(context, unit)
        stats = merge_groups(stats, own_stats)
        if own_rows is not None:
            rows.append(own_rows)
    segments = RecordSpec.from_contract(context.loaded.contract).segments
    predictions = pl.concat(rows) if rows else pl.DataFrame(schema=prediction_schema(segments))
    if arrival:
        return pieces.with_arrival(stats, predictions, context.spec.arrival)
    return stats, predictions


def _merge_partitions(context: MonitorContext, key: str) -> Manifest:
    """Check the units read, then keep one piece per partition: its statistics per window
    and its predictions."""
    spec, store = context.spec, context.store
    _check_units(context)
    arrival = settings(context).without_timestamp == "arrival"
    held = _held_ids(context)
    kept: list[Piece] = []
    by_file: dict[str, list[tuple[Unit, UnitOutcome]]] = {}
    for unit, outcome in zip(spec.plan.units, context.unit_outcomes, strict=True):
        by_file.setdefault(unit.parts[0].path, []).append((unit, outcome))
    for partition, file, digest in zip(spec.to_read, spec.plan.files, spec.plan.digests,
                                       strict=True):
        read = by_file.get(file, [])
        stats, predictions = _partition_parts(context, read, arrival)
        _repeated_ids(context, predictions, held, partition.name)
        piece = pieces.piece_key([o.manifest.key for _, o in read if o.manifest is not None]
                                 + [spec.arrival if arrival else ""])
        alone = read[0][1].manifest if len(read) == 1 else None
        if alone is not None and not arrival:  # the piece is the unit's own
            pieces.copy_piece(store, spec.monitor_id, piece, alone, predictions)
        else:
            pieces.write_piece(store, spec.monitor_id, piece, stats, predictions)
        kept.append(Piece(partition.name, partition.path, partition.size, partition.version,
                          digest, piece, sum(u.n_records for u, _ in read), _windows(stats)))
    frame = pl.DataFrame({"name": [p.name for p in kept], "key": [p.key for p in kept],
                          "n_records": [p.n_records for p in kept]},
                         schema={"name": pl.String, "key": pl.String, "n_records": pl.Int64})
    return store.publish("partitions", key, frame,
                         extra={"pieces": [p.to_dict() for p in kept]})


def _unit_hashes(context: MonitorContext) -> list[str]:
    return [o.manifest.sha256 for o in context.unit_outcomes if o.manifest is not None]


def _partition_params(context: MonitorContext) -> dict[str, Any]:
    return {"monitor": context.spec.monitor_id,
            "partitions": [p.name for p in context.spec.to_read]}


PARTITIONS: Stage[MonitorSpec] = Stage(
    "partitions", STAGE_VERSION, (), _merge_partitions, params=_partition_params,
    inputs=_unit_hashes, keyed_by_run=True, cached=False,
    fan_out=FanOut("records", _units, _windowed_params, read_windowed_unit, _title),
    title="check the partitions read, keep their statistics and predictions",
)


# -- labels -------------------------------------------------------------------------------


def _read_labels(context: MonitorContext, key: str) -> Manifest:
    """Each labels partition to read, kept as compact labels in arrival order (one written
    again after its labels were read keeps them first: `labels.again`)."""
    spec, store = context.spec, context.store
    state = stored_state(context)
    first = 1 if state is None else state.next_seq()
    labels = tuple(context.loaded.contract.decision.labels)
    kept = []
    for order, partition in enumerate(spec.labels_to_read, first):
        table = read_labels(partition, labels, order)
        earlier = None if state is None else state.labels.get(partition.name)
        if earlier is not None:
            table = again(pieces.read_labels(store, spec.monitor_id, [earlier.key],
                                             LABEL_SCHEMA), table)
        buffer = io.BytesIO()
        table.write_parquet(buffer)
        name = hashlib.sha256(buffer.getvalue()).hexdigest()[:32]
        pieces.write_labels(store, spec.monitor_id, name, table)
        kept.append({"name": partition.name, "path": partition.path, "size": partition.size,
                     "version": partition.version, "key": name, "n_labels": table.height,
                     "seq": order})
    frame = pl.DataFrame({"name": [k["name"] for k in kept],
                          "n_labels": [k["n_labels"] for k in kept]},
                         schema={"name": pl.String, "n_labels": pl.Int64})
    return store.publish("labels", key, frame, extra={"labels": kept})


LABELS: Stage[MonitorSpec] = Stage(
    "labels", STAGE_VERSION, (), _read_labels, keyed_by_run=True, cached=False,
    title="read the labels that arrived",
)

