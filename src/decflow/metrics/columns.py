"""Probability columns as arrays: the one conversion from a polars list column of label
probabilities to an n × labels numpy matrix, shared by metrics, comparisons, diagnostics
and replay."""

from __future__ import annotations

import numpy as np
import polars as pl


def probability_matrix(column: pl.Series, width: int, *, missing: float = float("nan")) -> (
    np.ndarray
):
    """A list column of probabilities → n × width float array; a null row (an errored
    call) becomes a row of `missing` (NaN by default)."""
    filled = column.fill_null(pl.lit([missing] * width, dtype=pl.List(pl.Float64)))
    return np.asarray(filled.list.to_array(width).to_numpy(), dtype=np.float64)
