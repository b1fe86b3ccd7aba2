"""A golden dataset's file before any table is built: its bytes and hash (what the `cases`
stage is keyed by), the fields a row may hold, and a case's input as the backend receives
it. Imports no polars: a plain remote run parses its cases and sends its first requests
with this alone (`decflow.pipeline.contract_run.first_wave`)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from decflow.data.bounds import MAX_DATASET_BYTES, mib
from decflow.errors import DatasetError

FORMATS = (".jsonl", ".json", ".parquet", ".csv")
ROW_FIELD_SET = frozenset(("id", "input", "expected", "metadata"))


def _read_dataset(file: Path, name: str) -> bytes:
    suffix = file.suffix.lower()
    if suffix not in FORMATS:
        raise DatasetError(
            f"{name}: unsupported dataset format '{suffix}' (use .jsonl, .json, .parquet or .csv)"
        )
    try:
        with file.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_DATASET_BYTES:
                raise DatasetError(
                    f"{name}: {mib(size)}; a golden dataset is read whole and holds at most "
                    f"{mib(MAX_DATASET_BYTES)} (SECURITY.md)")
            return handle.read(MAX_DATASET_BYTES + 1)
    except OSError as exc:
        raise DatasetError(f"{name}: cannot read dataset ({exc.strerror or exc})") from None


def _digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def read_dataset(path: str | Path, *, shown_path: str | None = None) -> tuple[bytes, str]:
    """The dataset's bytes and hash (sha256) without parsing them: what the `cases` stage
    is keyed by, and what it then loads (`load_golden(read=...)`)."""
    raw = _read_dataset(Path(path), shown_path or str(path))
    return raw, _digest(raw)


def case_input(input_text: str | None, input_json: str | None) -> str | dict[str, Any]:
    """The case input as the backend receives it (string or decoded object)."""
    if input_json is not None:
        decoded: dict[str, Any] = json.loads(input_json)  # stored by `compact_json` of an object
        return decoded
    return input_text if input_text is not None else ""
