"""A monitor's id index: every stored prediction's id hash (a record without an id has
none) with the piece that holds it and whether its record carried its outcome (`inline`),
sorted by hash, one Parquet file named in the state (`MonitorState.id_index`). With it a
run finds the repeated ids of what it reads and the pieces a new label's decision is in
without opening every piece (a run's cost follows what is new, plus one read of the
index)."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import polars as pl

from decflow.store.monitors import monitor_path
from decflow.store.store import Store

INDEX_SCHEMA = {"h": pl.Int64(), "piece": pl.String(), "inline": pl.Boolean()}
EMPTY = pl.DataFrame(schema=INDEX_SCHEMA)


def index_path(monitor: str, key: str) -> str:
    return monitor_path(monitor, f"pieces/ids-{key}.parquet")


def read_index(store: Store, monitor: str, key: str | None) -> pl.DataFrame:
    if key is None:
        return EMPTY
    return pl.read_parquet(io.BytesIO(store.read_bytes(index_path(monitor, key))))


def entries(predictions: pl.DataFrame, piece: str) -> pl.DataFrame:
    """A piece's predictions with an id as index entries."""
    return predictions.filter(pl.col("h").is_not_null()).select(
        pl.col("h"), pl.lit(piece).alias("piece"), (pl.col("correct") >= 0).alias("inline"))


def updated(index: pl.DataFrame, named: set[str], added: dict[str, pl.DataFrame]
            ) -> pl.DataFrame:
    """The index of the pieces `named` now: the old entries of pieces still named, and the
    entries `added` of the pieces read this run (by piece; they replace any old entries
    of the same piece), sorted by hash."""
    kept = index.filter(pl.col("piece").is_in(list(named - set(added))))
    return pl.concat([kept, *added.values()], how="vertical").sort("h")


def write_index(store: Store, monitor: str, index: pl.DataFrame) -> str:
    """Store the index under a name of its content; returns the name."""
    buffer = io.BytesIO()
    index.write_parquet(buffer, compression="zstd")
    data = buffer.getvalue()
    key = hashlib.sha256(data).hexdigest()[:32]
    store.write_bytes(index_path(monitor, key), data)
    return key


def hashes(index: pl.DataFrame, without: set[str]) -> np.ndarray:
    """The sorted id hashes of the index but for the pieces `without`."""
    found: np.ndarray = index.filter(~pl.col("piece").is_in(list(without)))["h"].to_numpy()
    return found
