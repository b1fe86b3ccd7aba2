"""The columns of the `cases` stage's table and the canonical JSON of an object input: one
definition for the strict row checker (`decflow.data.golden_dataset`) and the JSONL fast
path (`decflow.data.jsonl_cases`)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

CASES_SCHEMA = pl.Schema({
    "case_id": pl.String,
    "input_text": pl.String,
    "input_json": pl.String,
    "expected": pl.String,
    "metadata_json": pl.String,
    "position": pl.Int64,
})
# built once: `json.dumps` with options builds an encoder per call (one per dataset row)
_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_COMPACT_FINITE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                   allow_nan=False)


def compact_json(value: Any, *, allow_nan: bool = True) -> str:
    """The canonical compact form of an object input (keys sorted, non-ASCII kept);
    `allow_nan=False` raises ValueError on NaN/Infinity (and TypeError on non-JSON types)."""
    return (_COMPACT if allow_nan else _COMPACT_FINITE).encode(value)
