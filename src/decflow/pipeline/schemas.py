"""Column schemas of the stage tables (named once, here)."""

from __future__ import annotations

import polars as pl

# One row per backend request. `pre_error_*` is set for transformed cases whose generation
# failed (e.g. a paraphrase provider error): those are recorded as errors, never sent.
REQUESTS_SCHEMA = pl.Schema({
    "request_id": pl.String(),
    "case_id": pl.String(),
    "property": pl.String(),
    "sample": pl.Int64(),
    "input_text": pl.String(),
    "input_json": pl.String(),
    "shown_labels": pl.List(pl.String),
    "label_order": pl.List(pl.Int64),
    "steps_json": pl.String(),
    "pre_error_kind": pl.String(),
    "pre_error_message": pl.String(),
})
