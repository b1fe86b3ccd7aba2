"""What a monitor keeps per partition and per labels partition, in its own folder of the
store (`store.monitors`): written before the state that names them, named by content
(the keys of the units that made them), read back to compose windows.

A partition's piece is its statistics per window and group (the merge of its units'
`WindowedStats`) and its compact predictions (`scan.prediction_schema`), both Parquet.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Sequence

import polars as pl

from decflow.data.records.windows import NO_WINDOW
from decflow.metrics.production import GroupStats, merge_groups, stats_frame, stats_from_frame
from decflow.pipeline.monitor.scan import prediction_schema, split_key, window_group
from decflow.pipeline.production.statistics import ROWS_PART, STATS_PART
from decflow.store.monitors import labels_path, piece_paths
from decflow.store.store import Manifest, Store


def piece_key(unit_keys: Sequence[str]) -> str:
    """A partition's piece is named by the keys of the units it was read as (their content
    and the settings that shaped it)."""
    return hashlib.sha256("\n".join(unit_keys).encode()).hexdigest()[:32]


def _parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd")
    return buffer.getvalue()


def with_arrival(stats: dict[str, GroupStats], predictions: pl.DataFrame,
                 arrival: str) -> tuple[dict[str, GroupStats], pl.DataFrame]:
    """Records without a timestamp placed in the window of the run that read them
    (`monitor.without_timestamp: arrival`)."""
    moved: dict[str, GroupStats] = {}
    for key, group in stats.items():
        window, name = split_key(key)
        moved = merge_groups(moved, {window_group(window or arrival, name): group})
    placed = predictions.with_columns(pl.col("window").replace(NO_WINDOW, arrival))
    return moved, placed


def write_piece(store: Store, monitor: str, key: str, stats: dict[str, GroupStats],
                predictions: pl.DataFrame) -> None:
    stats_at, predictions_at = piece_paths(monitor, key)
    store.write_bytes(stats_at, _parquet(stats_frame(stats)))
    store.write_bytes(predictions_at, _parquet(predictions))


def copy_piece(store: Store, monitor: str, key: str, unit: Manifest,
               predictions: pl.DataFrame) -> None:
    """The piece of a partition read as one unit: the unit's own stored statistics and
    predictions, copied byte for byte (nothing encoded again). A unit of no record (an
    empty partition) kept no predictions part: `predictions` (empty, of the same schema)
    is written instead, since every piece the state names is read back whole."""
    stats_at, predictions_at = piece_paths(monitor, key)
    rows = None
    for part in unit.parts:
        if part.path.endswith(STATS_PART):
            store.write_bytes(stats_at, store.read_part_bytes(part))
        elif part.path.endswith(ROWS_PART):
            rows = store.read_part_bytes(part)
    store.write_bytes(predictions_at, _parquet(predictions) if rows is None else rows)


def read_stats(store: Store, monitor: str, key: str) -> dict[str, GroupStats]:
    return stats_from_frame(pl.read_parquet(io.BytesIO(store.read_bytes(
        piece_paths(monitor, key)[0]))))


def read_predictions(store: Store, monitor: str, keys: Iterable[str],
                     segments: tuple[str, ...]) -> pl.DataFrame:
    frames = [pl.read_parquet(io.BytesIO(store.read_bytes(piece_paths(monitor, key)[1])))
              for key in keys]
    schema = prediction_schema(segments)
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


def write_labels(store: Store, monitor: str, key: str, labels: pl.DataFrame) -> None:
    store.write_bytes(labels_path(monitor, key), _parquet(labels))


def read_labels(store: Store, monitor: str, keys: Iterable[str],
                schema: dict[str, pl.DataType]) -> pl.DataFrame:
    frames = [pl.read_parquet(io.BytesIO(store.read_bytes(labels_path(monitor, key))))
              for key in keys]
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)
