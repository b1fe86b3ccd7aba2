"""Column helpers shared by the meter and the persona analysis."""

from __future__ import annotations

import numpy as np
import polars as pl

from decflow.metrics import columns


def probability_matrix(column: pl.Series, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A list column of probabilities → (n × width matrix with zero rows for nulls, present)."""
    present = column.is_not_null().to_numpy()
    return columns.probability_matrix(column, width, missing=0.0), present


def label_codes(column: pl.Series) -> np.ndarray:
    """Selected labels (strings or indices) as integer codes that compare equal when the
    labels do; null (an errored call) becomes -1."""
    return column.rank("dense").fill_null(0).cast(pl.Int64).to_numpy() - 1
