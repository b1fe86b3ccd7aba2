"""Parquet production records: the JSONL fields as columns, `probabilities` a struct with one
float field per label, `metadata_json` (and `input_json` for object inputs) as JSON text,
`timestamp` a timezone-aware timestamp or an ISO 8601 string. Read in batches; the same
vectorized checks as JSONL, errors named by row.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.json as pa_json

from decflow.data.bounds import MAX_GROUP_BYTES, MAX_RECORD_FIELD_BYTES, mib
from decflow.data.parquet_bounds import check_group_footer, check_read, large_columns
from decflow.data.records.bytes import may_nest_deeper
from decflow.data.records.checks import NeedStrict, vectorized_table
from decflow.data.records.rules import (
    BOOL_FIELDS,
    NO_TIMEZONE,
    NUMBER_FIELDS,
    RECORD_FIELDS,
    STRING_FIELDS,
    RecordInvalid,
    RecordSpec,
    explain_line,
    loads_strict,
    normalize_record,
)
from decflow.data.records.units import parquet_footer
from decflow.errors import DatasetError
from decflow.store.remote import polars_options

PARQUET_BATCH_ROWS = 250_000


def parquet_batches(
    path: Path | str, spec: RecordSpec, rows: tuple[int, int] | None = None
) -> Iterator[tuple[pl.DataFrame, int]]:
    """Validated tables of one Parquet file (or of its rows `[first, first + n)`, 1-based,
    which start and end at row-group boundaries) with the 1-based row number of their
    first row. polars reads one row group at a time (memory is bounded by the largest row
    group, never the file), validated in batches of `PARQUET_BATCH_ROWS` rows."""
    scan = pl.scan_parquet(path, storage_options=polars_options(str(path)))
    try:
        names = scan.collect_schema().names()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    unknown = [n for n in names if n not in _PARQUET_COLUMNS]
    if unknown:
        raise DatasetError(
            f"{path}: unknown column(s) {unknown} (record columns are {list(_PARQUET_COLUMNS)})"
        )
    first, count = rows if rows is not None else (1, None)
    group_start = 1
    footer = parquet_footer(str(path))
    for index in range(footer.num_row_groups):
        size = footer.row_group(index).num_rows
        group_end = group_start + size
        if group_end > first and (count is None or group_start < first + count):
            check_group_footer(footer, index, str(path), group_start)
            try:
                group = scan.slice(group_start - 1, size).collect()
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise DatasetError(
                    f"{path}: row {group_start}: unreadable Parquet data ({exc})"
                ) from None
            check_read(group, str(path), group_start, limit=MAX_GROUP_BYTES,
                       what=f"row group {index + 1}",
                       rule=f"a row group holds at most {mib(MAX_GROUP_BYTES)} once read",
                       field_limit=MAX_RECORD_FIELD_BYTES,
                       columns=sorted(large_columns(footer, index, MAX_RECORD_FIELD_BYTES)))
            for offset in range(0, group.height, PARQUET_BATCH_ROWS):
                raw = group.slice(offset, PARQUET_BATCH_ROWS)
                yield _parquet_table(raw, path, spec, group_start + offset), group_start + offset
        group_start = group_end


_PARQUET_COLUMNS = (
    *(n for n in RECORD_FIELDS if n != "metadata"),
    "input_json",
    "metadata_json",
)


def _parquet_table(
    raw: pl.DataFrame, path: Path | str, spec: RecordSpec, first_row: int
) -> pl.DataFrame:
    """Parquet columns → the raw shape of the JSONL path, then the same checks. The
    `metadata_json` texts are parsed by Arrow in one go."""
    for name in _PARQUET_COLUMNS:
        if name not in raw.columns:
            raw = raw.with_columns(pl.lit(None).alias(name))
    problem = _parquet_types(raw)
    if problem is not None:
        raise DatasetError(f"{path}: {problem}")
    dtype = raw["timestamp"].dtype
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is None:
        nonnull = raw["timestamp"].is_not_null().arg_true()
        if nonnull.len():
            raise DatasetError(
                f"{path}: row {first_row + int(nonnull[0])}: {NO_TIMEZONE} "
                "(the Parquet column is a naive timestamp)"
            )
    raw = raw.with_columns(
        [pl.col(n).cast(pl.Float64) for n in NUMBER_FIELDS if raw[n].dtype != pl.Null]
        + [pl.col(n).cast(pl.Int64) for n in ("selected", "outcome")
           if raw[n].dtype in (pl.Int32, pl.Int64)]
    )
    lines = _RowLines(raw)
    meta_text, input_text = raw["metadata_json"], raw["input_json"]
    both = (input_text.is_not_null() & raw["input"].is_not_null()).arg_true()
    if both.len():
        row = first_row + int(both[0])
        raise DatasetError(f"{path}: row {row}: give either input or input_json, not both")
    try:
        metadata = _parse_json_column(meta_text, path, first_row, "metadata_json")
        _parse_json_column(input_text, path, first_row, "input_json")
        shaped = raw.drop("metadata_json", "input_json").with_columns(metadata=metadata)
        bad, table = vectorized_table(shaped, spec)
    except (NeedStrict, _MixedTypes):
        return _parquet_strict(lines, path, spec, first_row)
    if bad is not None:
        problem = explain_line(lines[bad], spec) or "record does not validate"
        raise DatasetError(f"{path}: row {first_row + bad}: {problem}")
    assert table is not None
    # a column the file lacks is Null-typed: String, so batches of every format concatenate
    return table.with_columns(metadata_json=meta_text.fill_null("{}"),
                              input_json=input_text.cast(pl.String))


def _parquet_types(raw: pl.DataFrame) -> str | None:
    numbers = (pl.Float64, pl.Float32, pl.Int64, pl.Int32)
    expected: dict[str, tuple[type[pl.DataType], ...]] = {
        "timestamp": (pl.String, pl.Datetime),
        "probabilities": (pl.Struct,),
        "metadata_json": (pl.String,),
        "input_json": (pl.String,),
        "input": (pl.String,),
        "selected": (pl.String, pl.Int64, pl.Int32),
        "outcome": (pl.String, pl.Int64, pl.Int32),
    }
    expected.update({name: (pl.String,) for name in STRING_FIELDS if name != "timestamp"})
    expected.update({name: numbers for name in NUMBER_FIELDS})
    expected.update({name: (pl.Boolean,) for name in BOOL_FIELDS})
    for name, kinds in expected.items():
        dtype = raw[name].dtype
        if dtype != pl.Null and not isinstance(dtype, kinds):
            wanted = " or ".join(k.__name__ for k in kinds)
            return f"column '{name}' has type {dtype}, expected {wanted}"
    probs = raw["probabilities"].dtype
    if isinstance(probs, pl.Struct):
        for f in probs.fields:
            if not isinstance(f.dtype, numbers):
                return f"column 'probabilities.{f.name}' has type {f.dtype}, expected a number"
    return None


class _MixedTypes(Exception):
    """Valid JSON objects whose fields change type between rows: needs the strict path."""


def _parse_json_column(text: pl.Series, path: Path | str, first_row: int, name: str) -> pl.Series:
    """A column of JSON objects as text → a struct column, parsed strictly by Arrow. Raises
    `DatasetError` for a row that is not a JSON object, `_MixedTypes` when Arrow cannot
    type the column. Logs repeat their metadata: when most texts repeat, each distinct
    text is parsed once (and the whole column again only to name a bad row)."""
    if text.is_null().all():
        return pl.repeat(None, text.len(), dtype=pl.Null, eager=True)
    distinct = text.drop_nulls().unique()
    if distinct.len() * 4 < text.len():
        try:
            parsed = _parse_json_texts(distinct, path, first_row, name)
        except DatasetError:
            pass  # parsed row by row below, to name the first bad row in file order
        else:
            lookup = pl.DataFrame({"text": distinct, "parsed": parsed})
            joined = text.to_frame("text").join(
                lookup, on="text", how="left", maintain_order="left"
            )
            return joined["parsed"].alias(text.name)
    return _parse_json_texts(text, path, first_row, name)


def _parse_json_texts(text: pl.Series, path: Path | str, first_row: int, name: str) -> pl.Series:
    joined = text.fill_null("{}").str.replace_all("\n", " ", literal=True).str.join("\n")
    data = joined.item().encode()
    options = pa_json.ParseOptions(unexpected_field_behavior="infer")
    arrow = None
    if not may_nest_deeper(data):  # Arrow's reader overflows its stack on deep nesting
        try:
            arrow = pa_json.read_json(io.BytesIO(data), parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            arrow = None
    if arrow is not None and arrow.num_rows == text.len():
        parsed = pl.from_arrow(arrow)
        assert isinstance(parsed, pl.DataFrame)
        if not parsed.width:
            return pl.repeat(None, text.len(), dtype=pl.Null, eager=True)
        struct = parsed.to_struct(name)
        return pl.select(pl.when(text.is_not_null()).then(struct)).to_series()
    for i, value in enumerate(text):
        if value is None:
            continue
        try:
            obj = loads_strict(value)
        except ValueError as exc:
            where = f"{path}: row {first_row + i}: {name}"
            raise DatasetError(f"{where}: invalid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}: row {first_row + i}: {name}: must be a JSON object")
    raise _MixedTypes


class _RowLines:
    """Parquet rows rendered as JSONL-style records, for the strict parser (on demand)."""

    def __init__(self, raw: pl.DataFrame) -> None:
        self.raw = raw
        self._texts: pl.DataFrame | None = None  # made on the first row asked for

    def __len__(self) -> int:
        return self.raw.height

    def __getitem__(self, index: int) -> str:
        if self._texts is None:
            # typed timestamps as ISO 8601 text by polars: Python's datetime cannot hold an
            # instant of year 0 or 10000, which a Parquet timestamp can (the text is
            # refused). Only for a batch that needs a row: 10M rows' texts cost 2 CPU s.
            self._texts = self.raw
            if isinstance(self.raw["timestamp"].dtype, pl.Datetime):
                self._texts = self.raw.with_columns(
                    pl.col("timestamp").dt.to_string("%Y-%m-%dT%H:%M:%S%.f%:z"))
        row = self._texts.row(index, named=True)
        record = {k: v for k, v in row.items() if k in RECORD_FIELDS and v is not None}
        for column, field in (("metadata_json", "metadata"), ("input_json", "input")):
            if row.get(column) is not None:
                record[field] = loads_strict(row[column])
        return json.dumps(record, ensure_ascii=False)


def _parquet_strict(
    lines: _RowLines, path: Path | str, spec: RecordSpec, first_row: int
) -> pl.DataFrame:
    rows = []
    for i in range(len(lines)):
        try:
            rows.append(normalize_record(loads_strict(lines[i]), spec, i + 1))
        except RecordInvalid as exc:
            raise DatasetError(f"{path}: row {first_row + i}: {exc}") from None
    return pl.DataFrame(rows, schema=spec.schema, orient="row")
