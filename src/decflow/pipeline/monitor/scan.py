"""What a monitor keeps of each record it reads, computed in the check's own single pass
over a unit (`production.statistics.aggregate_unit`): the check's statistics per window
and group (`WindowedStats`, keys `<window>\\x1e<group>`), and one compact prediction per
record with an id — its stable id hash, window, selected label, top confidence, inline
correctness (-1 unknown) and segment tokens — for labels that arrive later, and per record
without an id that carries its outcome inline (id hash null: no label can join it; its
correctness feeds the harmful-shift alarm). Never an input or any other field of the
record."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from decflow.data.records.id_hashes import stable_id_hashes
from decflow.data.records.reader import segment_column
from decflow.data.records.windows import DEFAULT_WINDOW, window_names
from decflow.pipeline.production.statistics import BatchStats

WINDOW_SEPARATOR = "\x1e"
UNKNOWN = -1  # correctness not given inline


def window_group(window: str, group: str) -> str:
    return f"{window}{WINDOW_SEPARATOR}{group}"


def split_key(key: str) -> tuple[str, str]:
    """(window, group) of a windowed statistics key."""
    window, _, group = key.partition(WINDOW_SEPARATOR)
    return window, group


def prediction_schema(segments: tuple[str, ...]) -> dict[str, pl.DataType]:
    return {"h": pl.Int64(), "window": pl.String(), "selected": pl.UInt8(),
            "confidence": pl.Float64(), "correct": pl.Int8(),
            **{segment_column(key): pl.String() for key in segments}}


@dataclass(frozen=True)
class WindowedStats(BatchStats):
    """`BatchStats` per window of the records' timestamps (`window`: 1h, 6h, 1d, 7d);
    records without a timestamp go to the window named `""`."""

    window: str = DEFAULT_WINDOW

    def prefixes(self, table: pl.DataFrame) -> tuple[list[str], np.ndarray]:
        """Each record's window, as the key prefix `<window>\x1e` of its groups (one more
        group column of the check's own pass)."""
        names = table.select(window_names(pl.col("timestamp"), self.window))["timestamp"]
        found = names.unique(maintain_order=True).to_list()
        numbers = names.replace_strict(found, list(range(len(found))), return_dtype=pl.Int64)
        return [window_group(name, "") for name in found], numbers.to_numpy()

    def rows(self, table: pl.DataFrame) -> pl.DataFrame:
        """The compact predictions of the records that carry an id, and of those without one
        (the reader names them `record-<position>`, which names no decision a label could
        join) that carry their outcome inline: kept with a null id hash, for the
        harmful-shift alarm and the windows' labelled risk (in file order, as read)."""
        anonymous = pl.col("id") == pl.lit("record-") + pl.col("position").cast(pl.String)
        marked = table.with_columns(anonymous=anonymous)
        own = marked.filter(~pl.col("anonymous") | pl.col("outcome_correct").is_not_null())
        labels = list(self.spec.labels)
        hashes = pl.Series(stable_id_hashes(own["id"]).view(np.int64), dtype=pl.Int64)
        return pl.DataFrame({
            "h": hashes.zip_with(~own["anonymous"], pl.Series([None], dtype=pl.Int64)),
            "window": own.select(window_names(pl.col("timestamp"), self.window))["timestamp"],
            "selected": own["selected"].replace_strict(labels, list(range(len(labels))),
                                                       return_dtype=pl.UInt8),
            "confidence": own["confidence"],
            "correct": own["outcome_correct"].cast(pl.Int8).fill_null(UNKNOWN),
            **{segment_column(key): own[segment_column(key)] for key in self.spec.segments},
        }, schema=prediction_schema(self.spec.segments))
