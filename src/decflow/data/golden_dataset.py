"""Golden datasets: `.jsonl`, `.json`, `.parquet`, `.csv` → one polars table of cases.

Row rules follow DecGuard 0.1 exactly (fields `input`, `expected`, `id`, `metadata`; missing
ids become `case-<n>` counting non-blank rows; integers in `expected` become strings so
score levels can be written `4`). The table columns are the `cases` stage schema:
`case_id, input_text, input_json, expected, metadata_json, position`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from decflow.data.strict_json import unique_keys
from decflow.errors import DatasetError

CASES_SCHEMA = pl.Schema({
    "case_id": pl.String,
    "input_text": pl.String,
    "input_json": pl.String,
    "expected": pl.String,
    "metadata_json": pl.String,
    "position": pl.Int64,
})
ROW_FIELDS = ("id", "input", "expected", "metadata")


@dataclass(frozen=True)
class GoldenDataset:
    path: str
    hash: str
    cases: pl.DataFrame

    @property
    def n_cases(self) -> int:
        return self.cases.height

    @property
    def n_labeled(self) -> int:
        return int(self.cases["expected"].is_not_null().sum())


def compact_json(value: Any) -> str:
    """The canonical compact form of an object input (keys sorted, non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON value {name}")


def strict_json_loads(text: str) -> Any:
    """json.loads that rejects duplicate keys and NaN/Infinity literals."""
    return json.loads(text, object_pairs_hook=unique_keys, parse_constant=_reject_constant)


class _RowChecker:
    """Validates rows one by one and accumulates the columns of the cases table."""

    def __init__(self, path: str, labels: Sequence[str], unit: str) -> None:
        self.path = path
        self.labels = set(labels)
        self.unit = unit  # "line" for JSONL, "case" for JSON lists, "row" for tables
        self.first_seen: dict[str, int] = {}
        self.columns: dict[str, list[Any]] = {name: [] for name in CASES_SCHEMA}

    def fail(self, where: int, message: str) -> DatasetError:
        return DatasetError(f"{self.path}: {self.unit} {where}: {message}")

    def add(self, row: Any, where: int) -> None:
        if not isinstance(row, dict):
            raise self.fail(where, "each case must be a JSON object")
        unknown = sorted(set(row) - set(ROW_FIELDS))
        if unknown:
            raise self.fail(
                where, f"unknown field '{unknown[0]}' (allowed: id, input, expected, metadata)"
            )
        position = len(self.columns["case_id"]) + 1
        case_id = self._case_id(row, where, position)
        text, obj = self._input(row, where)
        expected = self._expected(row, where)
        metadata = row.get("metadata", {})
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise self.fail(where, "metadata must be a JSON object")
        self.columns["case_id"].append(case_id)
        self.columns["input_text"].append(text)
        self.columns["input_json"].append(obj)
        self.columns["expected"].append(expected)
        self.columns["metadata_json"].append(compact_json(metadata))
        self.columns["position"].append(position)

    def _case_id(self, row: dict[str, Any], where: int, position: int) -> str:
        if "id" not in row:
            case_id = f"case-{position}"
        else:
            case_id = row["id"]
            if not isinstance(case_id, str) or not case_id.strip():
                raise self.fail(where, "id must be a non-empty string")
        first = self.first_seen.get(case_id)
        if first is not None:
            raise self.fail(where, f"duplicate case id '{case_id}' (first at {self.unit} {first})")
        self.first_seen[case_id] = where
        return case_id

    def _input(self, row: dict[str, Any], where: int) -> tuple[str | None, str | None]:
        if "input" not in row:
            raise self.fail(where, "missing required field 'input'")
        value = row["input"]
        if isinstance(value, str):
            return value, None
        if isinstance(value, dict):
            return None, compact_json(value)
        raise self.fail(where, "input must be a string or a JSON object")

    def _expected(self, row: dict[str, Any], where: int) -> str | None:
        value = row.get("expected")
        if value is None:
            return None
        if isinstance(value, bool | float):
            raise self.fail(where, f"expected {value!r} is not a label (write labels as strings)")
        if isinstance(value, int):
            value = str(value)
        if not isinstance(value, str):
            raise self.fail(where, "expected must be a label string")
        if value not in self.labels:
            known = ", ".join(sorted(self.labels))
            raise self.fail(where, f"unknown label '{value}' (the contract defines: {known})")
        return value

    def table(self) -> pl.DataFrame:
        if not self.columns["case_id"]:
            raise DatasetError(f"{self.path}: dataset contains no cases")
        return pl.DataFrame(self.columns, schema=CASES_SCHEMA)


def _jsonl_rows(path: str, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, strict_json_loads(line)
        except ValueError as exc:
            raise DatasetError(f"{path}: line {number}: invalid JSON ({exc})") from None


def _json_rows(path: str, text: str) -> Iterator[tuple[int, Any]]:
    try:
        data = strict_json_loads(text)
    except ValueError as exc:
        raise DatasetError(f"{path}: invalid JSON ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json dataset must be a list of case objects")
    yield from enumerate(data, start=1)


def _table_rows(path: str, frame: pl.DataFrame) -> Iterator[tuple[int, Any]]:
    columns = set(frame.columns)
    allowed = {"id", "input", "input_json", "expected", "metadata_json"}
    unknown = sorted(columns - allowed)
    if unknown:
        raise DatasetError(
            f"{path}: unknown column '{unknown[0]}' "
            "(allowed: id, input or input_json, expected, metadata_json)"
        )
    if ("input" in columns) == ("input_json" in columns):
        raise DatasetError(f"{path}: needs exactly one of the columns 'input' or 'input_json'")
    for number, record in enumerate(frame.iter_rows(named=True), start=1):
        row: dict[str, Any] = {}
        if record.get("id") is not None:
            row["id"] = record["id"]
        if "input" in columns:
            row["input"] = record["input"]
        else:
            raw = record["input_json"]
            try:
                row["input"] = strict_json_loads(raw) if isinstance(raw, str) else raw
            except ValueError as exc:
                raise DatasetError(
                    f"{path}: row {number}: input_json: invalid JSON ({exc})"
                ) from None
            if not isinstance(row["input"], dict):
                raise DatasetError(f"{path}: row {number}: input_json must be a JSON object")
        if record.get("expected") is not None:
            row["expected"] = _table_label(record["expected"])
        meta = record.get("metadata_json")
        if meta is not None:
            try:
                row["metadata"] = strict_json_loads(meta)
            except (TypeError, ValueError) as exc:
                raise DatasetError(
                    f"{path}: row {number}: metadata_json: invalid JSON ({exc})"
                ) from None
        yield number, row


def _table_label(value: Any) -> Any:
    # CSV readers may type integral score levels as numbers; levels are labels (strings).
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _read_dataset(file: Path, name: str) -> bytes:
    suffix = file.suffix.lower()
    if suffix not in (".jsonl", ".json", ".parquet", ".csv"):
        raise DatasetError(
            f"{name}: unsupported dataset format '{suffix}' (use .jsonl, .json, .parquet or .csv)"
        )
    try:
        return file.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{name}: cannot read dataset ({exc.strerror or exc})") from None


def _digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def dataset_hash(path: str | Path, *, shown_path: str | None = None) -> str:
    """The dataset's hash (sha256 of its bytes) without parsing it: what the `cases`
    stage is keyed by."""
    return _digest(_read_dataset(Path(path), shown_path or str(path)))


def load_golden(path: str | Path, labels: Sequence[str], *, shown_path: str | None = None) -> (
    GoldenDataset
):
    """Load and validate a golden dataset; `shown_path` is the path as the user typed it."""
    file = Path(path)
    name = shown_path or str(path)
    suffix = file.suffix.lower()
    raw = _read_dataset(file, name)
    digest = _digest(raw)
    rows: Iterator[tuple[int, Any]]
    if suffix in (".jsonl", ".json"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError(f"{name}: the dataset must be UTF-8") from None
        unit = "line" if suffix == ".jsonl" else "case"
        rows = _jsonl_rows(name, text) if suffix == ".jsonl" else _json_rows(name, text)
    else:
        unit = "row"
        try:
            frame = (
                pl.read_parquet(file)
                if suffix == ".parquet"
                else pl.read_csv(file, infer_schema=False)
            )
        except Exception as exc:  # polars raises many error types for unreadable files
            raise DatasetError(f"{name}: cannot read dataset ({exc})") from None
        rows = _table_rows(name, frame)
    checker = _RowChecker(name, labels, unit)
    for where, row in rows:
        checker.add(row, where)
    return GoldenDataset(path=name, hash=digest, cases=checker.table())


def case_input(input_text: str | None, input_json: str | None) -> str | dict[str, Any]:
    """The case input as the backend receives it (string or decoded object)."""
    if input_json is not None:
        return json.loads(input_json)
    return input_text if input_text is not None else ""
