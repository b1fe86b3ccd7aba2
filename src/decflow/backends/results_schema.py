"""The columns of a results table (the `results` stage's chunks): one definition for the
engine that builds them and the stages that read them. Apart from `decflow.backends.engine`
so that the engine loads polars only where it builds a table (a remote run's first
requests go out before polars is imported)."""

from __future__ import annotations

import polars as pl

RESULTS_SCHEMA = pl.Schema({
    "request_id": pl.String(),
    "probabilities": pl.List(pl.Float64),
    "selected": pl.String(),
    "confidence": pl.Float64(),
    "latency_ms": pl.Float64(),
    "error_kind": pl.String(),
    "error_message": pl.String(),
    "model": pl.String(),
    "model_version": pl.String(),
    "metadata_json": pl.String(),
    # the call-cache entry (its pack's key) the answer was served from; null: the backend
    # was asked (runs stored before the cache existed have no such column)
    "cache_entry": pl.String(),
})
