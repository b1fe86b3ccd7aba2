"""Golden datasets: `.jsonl`, `.json`, `.parquet`, `.csv` → one polars table of cases.

Row rules follow DecGuard 0.1 exactly (fields `input`, `expected`, `id`, `metadata`; missing
ids become `case-<n>` counting non-blank rows; integers in `expected` become strings so
score levels can be written `4`). The table columns are the `cases` stage schema:
`case_id, input_text, input_json, expected, metadata_json, position`.

Datasets are untrusted files: text formats must be UTF-8 (`decflow.textfile`), JSON is
strict (`decflow.strictjson`: no duplicate keys, NaN, Infinity, overflowing numbers or
nesting deeper than 100 levels), and every refusal names the file, the line (JSONL), case
(JSON list, with its line) or row (tables), and the field. JSONL lines end at `\n` only: a
U+2028 inside a JSON string is text, not a line break.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from polars.datatypes import DataTypeClass

from decflow.data.bounds import (
    MAX_DATASET_BYTES,
    MAX_FIELD_BYTES,
    MAX_JSON_FILE_VALUES,
    MAX_JSON_VALUES,
    mib,
)
from decflow.data.case_table import CASES_SCHEMA as CASES_SCHEMA
from decflow.data.case_table import compact_json as compact_json
from decflow.data.dataset_file import ROW_FIELD_SET
from decflow.data.dataset_file import case_input as case_input
from decflow.data.dataset_file import read_dataset as read_dataset
from decflow.data.jsonl_cases import CaseColumns, jsonl_cases
from decflow.data.parquet_bounds import check_group_footer, check_read
from decflow.errors import DatasetError
from decflow.strictjson import JsonProblem, dotted, key_lines
from decflow.strictjson import loads as strict_json_loads
from decflow.textfile import TextProblem, decode_utf8, utf8_size
from decflow.untrusted import quote

# characters of a column name an error shows: enough to recognise a typo, too few to
# carry a secret out of a file that was never a dataset
COLUMN_EXCERPT = 10


@dataclass(frozen=True)
class GoldenDataset:
    """A golden dataset: its path, its hash and its cases table."""

    path: str
    hash: str
    cases: pl.DataFrame

    @property
    def n_cases(self) -> int:
        return self.cases.height

    @property
    def n_labeled(self) -> int:
        return int(self.cases["expected"].is_not_null().sum())


class _RowChecker:
    """Validates rows one by one and accumulates the columns of the cases table."""

    def __init__(
        self,
        path: str,
        labels: Sequence[str],
        unit: str,
        line_of: Callable[[int], int | None] | None = None,
    ) -> None:
        self.path = path
        self.labels = set(labels)
        self.unit = unit  # "line" for JSONL, "case" for JSON lists, "row" for tables
        self.line_of = line_of  # the line a case starts on (JSON lists)
        self.first_seen: dict[str, int] = {}
        self.columns: dict[str, list[Any]] = {name: [] for name in CASES_SCHEMA}

    def fail(self, where: int, message: str) -> DatasetError:
        line = self.line_of(where) if self.line_of is not None else None
        at = f"{self.unit} {where}" + ("" if line is None else f" (line {line})")
        return DatasetError(f"{self.path}: {at}: {message}")

    def add(self, row: Any, where: int) -> None:
        if not isinstance(row, dict):
            raise self.fail(where, "each case must be a JSON object")
        unknown = sorted(row.keys() - ROW_FIELD_SET)
        if unknown:
            raise self.fail(
                where,
                f"unknown field {quote(unknown[0])} (allowed: id, input, expected, metadata)",
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
        self.columns["case_id"].append(self._text(where, "id", case_id))
        self.columns["input_text"].append(self._text(where, "input", text))
        self.columns["input_json"].append(self._text(where, "input", obj))
        self.columns["expected"].append(self._text(where, "expected", expected))
        self.columns["metadata_json"].append(
            # most cases carry none: "{}" is its compact JSON, no encoding needed
            self._text(where, "metadata", self._json(metadata, where, "metadata"))
            if metadata else "{}")
        self.columns["position"].append(position)

    def _text(self, where: int, field: str, value: str | None) -> str | None:
        """A text as it will be stored: valid Unicode, at most `MAX_FIELD_BYTES`."""
        if value is not None:
            try:
                utf8_size(value, MAX_FIELD_BYTES)
            except TextProblem as exc:
                raise self.fail(where, f"{field} {exc}") from None
        return value

    def _case_id(self, row: dict[str, Any], where: int, position: int) -> str:
        if "id" not in row:
            case_id = f"case-{position}"
        else:
            case_id = row["id"]
            if not isinstance(case_id, str) or not case_id.strip():
                raise self.fail(where, "id must be a non-empty string")
        first = self.first_seen.get(case_id)
        if first is not None:
            raise self.fail(
                where, f"duplicate case id {quote(case_id)} (first at {self.unit} {first})"
            )
        self.first_seen[case_id] = where
        return case_id

    def _input(self, row: dict[str, Any], where: int) -> tuple[str | None, str | None]:
        if "input" not in row:
            raise self.fail(where, "missing required field 'input'")
        value = row["input"]
        if isinstance(value, str):
            return value, None
        if isinstance(value, dict):
            return None, self._json(value, where, "input")
        raise self.fail(where, "input must be a string or a JSON object")

    def _json(self, value: dict[str, Any], where: int, field: str) -> str:
        # JSON files were parsed strictly; a Parquet struct may still hold NaN or a date.
        try:
            return compact_json(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.fail(where, f"{field} is not plain JSON data ({exc})") from None

    def _expected(self, row: dict[str, Any], where: int) -> str | None:
        value = row.get("expected")
        if value is None:
            return None
        if isinstance(value, bool | float):
            raise self.fail(
                where, f"expected {quote(value)} is not a label (write labels as strings)"
            )
        if isinstance(value, int):
            value = str(value)
        if not isinstance(value, str):
            raise self.fail(where, "expected must be a label string")
        if value not in self.labels:
            known = ", ".join(sorted(self.labels))
            raise self.fail(
                where, f"unknown label {quote(value)} (the contract defines: {known})"
            )
        return value

    def table(self) -> pl.DataFrame:
        if not self.columns["case_id"]:
            raise DatasetError(f"{self.path}: dataset contains no cases")
        return pl.DataFrame(self.columns, schema=CASES_SCHEMA)


def _jsonl_rows(path: str, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, strict_json_loads(line.removesuffix("\r"), max_values=MAX_JSON_VALUES)
        except JsonProblem as exc:
            raise DatasetError(
                f"{path}: line {number}, column {exc.column}: {_problem(exc)}"
            ) from None


def _problem(exc: JsonProblem, skip: int = 0) -> str:
    """`invalid JSON: field: reason`, the first `skip` parts of the path left out."""
    field = dotted(exc.path[skip:])
    return f"invalid JSON: {field}: {exc.reason}" if field else f"invalid JSON: {exc.reason}"


def _json_rows(path: str, text: str) -> Iterator[tuple[int, Any]]:
    try:
        data = strict_json_loads(text, max_values=MAX_JSON_FILE_VALUES)
    except JsonProblem as exc:
        where = f"line {exc.line}, column {exc.column}"
        if exc.path and isinstance(exc.path[0], int):
            where = f"case {exc.path[0] + 1} ({where})"
        raise DatasetError(f"{path}: {where}: {_problem(exc, skip=1)}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json dataset must be a list of case objects")
    yield from enumerate(data, start=1)


def _json_case_lines(text: str) -> Callable[[int], int | None]:
    """The line each case of a JSON list starts on, worked out once and only when needed."""
    lines: dict[tuple[str | int, ...], int] = {}

    def line_of(case: int) -> int | None:
        if not lines:
            lines.update(key_lines(text))
        return lines.get((case - 1,))

    return line_of


def _json_cell(path: str, number: int, column: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return strict_json_loads(raw, max_values=MAX_JSON_VALUES)
    except JsonProblem as exc:
        raise DatasetError(
            f"{path}: row {number}: {column}, column {exc.column} of the cell: {_problem(exc)}"
        ) from None


def _table_rows(path: str, frame: pl.DataFrame, *, header_line: bool = False) -> (
    Iterator[tuple[int, Any]]
):
    """Rows of a Parquet or CSV dataset (`header_line`: the column names are a CSV file's
    first line)."""
    columns = set(frame.columns)
    allowed = {"id", "input", "input_json", "expected", "metadata_json"}
    unknown = sorted(columns - allowed)
    if unknown:
        # a CSV "header" may be a line of a file that is no dataset at all (a credentials
        # file): never shown whole, and beyond a short excerpt
        if not header_line:
            shown = f"unknown column {quote(unknown[0])}"
        elif len(frame.columns) > 1:
            shown = f"line 1: unknown column {quote(unknown[0], COLUMN_EXCERPT)}"
        else:
            shown = "line 1 names none of the dataset's columns"
        raise DatasetError(
            f"{path}: {shown} (allowed: id, input or input_json, expected, metadata_json)"
        )
    if ("input" in columns) == ("input_json" in columns):
        raise DatasetError(f"{path}: needs exactly one of the columns 'input' or 'input_json'")
    for name, dtype in frame.schema.items():
        if dtype.is_temporal():
            raise DatasetError(f"{path}: column {quote(name)} has type {dtype}; ids, inputs "
                               "and labels are text (an input may also be a JSON object)")
    for number, record in _python_rows(path, frame):
        row: dict[str, Any] = {}
        if record.get("id") is not None:
            row["id"] = record["id"]
        if "input" in columns:
            row["input"] = record["input"]
        else:
            row["input"] = _json_cell(path, number, "input_json", record["input_json"])
            if not isinstance(row["input"], dict):
                raise DatasetError(f"{path}: row {number}: input_json must be a JSON object")
        if record.get("expected") is not None:
            row["expected"] = _table_label(record["expected"])
        meta = record.get("metadata_json")
        if meta is not None:
            row["metadata"] = _json_cell(path, number, "metadata_json", meta)
        yield number, row


def _python_rows(path: str, frame: pl.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows as Python values, numbered from 1. A date or time inside a struct becomes a
    Python `date`/`datetime`, which cannot hold year 0 or years past 9999 (a Parquet value
    can): such a row is not plain JSON data, as any date in an input is, and is reported as
    that rather than ending the command with Python's own error."""
    nested = [name for name, dtype in frame.schema.items() if _holds_temporal(dtype)]
    # row by row only when a conversion can fail, so that the failing row is the one named
    rows = frame.iter_rows(named=True, buffer_size=0 if nested else 512)
    number = 0
    while True:
        number += 1
        try:
            record = next(rows)
        except StopIteration:
            return
        except (ValueError, OverflowError):
            if not nested:
                raise
            raise DatasetError(
                f"{path}: row {number}: {nested[0]} is not plain JSON data (a date or time "
                "outside the years 1 to 9999)"
            ) from None
        yield number, record


def _holds_temporal(dtype: pl.DataType | DataTypeClass) -> bool:
    if dtype.is_temporal():
        return True
    if isinstance(dtype, pl.Struct):
        return any(_holds_temporal(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _holds_temporal(dtype.inner)
    return False


def _csv_header(path: str, text: str) -> None:
    header = next(csv.reader(io.StringIO(text)), [])
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise DatasetError(f"{path}: line 1: column {quote(repeated[0], COLUMN_EXCERPT)} "
                           "appears more than once")


def _table_label(value: Any) -> Any:
    # CSV readers may type integral score levels as numbers; levels are labels (strings).
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _check_footer(raw: bytes, name: str) -> None:
    """Every row group of a Parquet dataset, and all of them together, small enough to
    read (`decflow.data.bounds`), from the footer alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(io.BytesIO(raw)).metadata
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{name}: cannot read dataset ({exc})") from None
    first_row, decompressed = 1, 0
    for index in range(metadata.num_row_groups):
        check_group_footer(metadata, index, name, first_row)
        group = metadata.row_group(index)
        decompressed += sum(group.column(i).total_uncompressed_size
                            for i in range(group.num_columns))
        if decompressed > MAX_DATASET_BYTES:
            raise DatasetError(
                f"{name}: row {first_row:,}: the dataset passes {mib(MAX_DATASET_BYTES)} "
                f"decompressed here; a golden dataset holds at most "
                f"{mib(MAX_DATASET_BYTES)} (SECURITY.md)")
        first_row += group.num_rows


def load_golden(path: str | Path, labels: Sequence[str], *, shown_path: str | None = None,
                read: tuple[bytes, str] | None = None,
                columns: CaseColumns | None = None) -> GoldenDataset:
    """Load and validate a golden dataset; `shown_path` is the path as the user typed it,
    `read` what `read_dataset` returned for it (the file is then not read again),
    `columns` what `jsonl_cases.case_columns` made of those bytes and `labels`."""
    file = Path(path)
    name = shown_path or str(path)
    suffix = file.suffix.lower()
    raw, digest = read or read_dataset(file, shown_path=name)
    if suffix == ".jsonl" and (cases := jsonl_cases(raw, labels, columns)) is not None:
        return GoldenDataset(path=name, hash=digest, cases=cases)
    rows: Iterator[tuple[int, Any]]
    line_of = None
    if suffix in (".jsonl", ".json", ".csv"):
        try:
            text = decode_utf8(raw)
        except TextProblem as exc:
            raise DatasetError(f"{name}: {exc}") from None
    if suffix in (".jsonl", ".json"):
        unit = "line" if suffix == ".jsonl" else "case"
        if suffix == ".jsonl":
            rows = _jsonl_rows(name, text)
        else:
            rows, line_of = _json_rows(name, text), _json_case_lines(text)
    else:
        unit = "row"
        if suffix == ".csv":
            _csv_header(name, text)
        try:
            if suffix == ".parquet":
                _check_footer(raw, name)
                frame = pl.read_parquet(io.BytesIO(raw))
            else:
                frame = pl.read_csv(io.BytesIO(raw), infer_schema=False)
        except DatasetError:
            raise
        except (Exception, pl.exceptions.PanicException) as exc:  # polars raises many types
            raise DatasetError(f"{name}: cannot read dataset ({exc})") from None
        check_read(frame, name, 1, limit=MAX_DATASET_BYTES, what="the dataset",
                   rule=f"a golden dataset holds at most {mib(MAX_DATASET_BYTES)}",
                   field_limit=MAX_FIELD_BYTES)
        rows = _table_rows(name, frame, header_line=suffix == ".csv")
    checker = _RowChecker(name, labels, unit, line_of)
    for where, row in rows:
        checker.add(row, where)
    return GoldenDataset(path=name, hash=digest, cases=checker.table())
