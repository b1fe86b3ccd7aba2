"""The memory bounds of SECURITY.md, each refused before the memory is taken, naming the
file and the row (or line): Parquet row groups (`decflow.data.parquet_bounds`), JSON value
counts (`decflow.strictjson.values_over`), golden fields, JSONL record lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decflow.data import parquet_bounds
from decflow.data.bounds import MAX_FIELD_BYTES
from decflow.data.golden_dataset import load_golden
from decflow.data.parquet_bounds import check_group_footer, check_read
from decflow.data.records.blocks import BlockReader, LongLine
from decflow.errors import DatasetError
from decflow.strictjson import JsonProblem, loads, values_over

LABELS = ["refund", "reject", "review"]


def footer(table: pa.Table, **options: object) -> object:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)  # type: ignore[arg-type]
    return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata


def repeated(text: str, rows: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([text]))


@pytest.mark.parametrize(("bound", "table", "message"), [
    ("MAX_GROUP_ROWS", pa.table({"a": [True] * 101}),
     r"f\.parquet: rows 11-111 \(row group 1\): 101 rows in one row group; at most 100"),
    ("MAX_GROUP_VALUES", pa.table({"a": [list(range(60))] * 2}),
     r"120 values in one row group; at most 100 are read at once"),
    ("MAX_GROUP_BYTES", pa.table({"a": ["y" * 1000] * 101}),
     r"f\.parquet: rows 11-111 \(row group 1\): 10\d,\d+ bytes once decompressed; at most "
     r"100,000 bytes are read at once; write the file with smaller row groups"),
])
def test_a_row_group_over_a_bound_is_refused_from_the_footer(
    bound: str, table: pa.Table, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 100 if bound != "MAX_GROUP_BYTES" else 100_000
    monkeypatch.setattr(parquet_bounds, bound, limit)
    metadata = footer(table, compression="zstd", use_dictionary=False)
    with pytest.raises(DatasetError, match=message):
        check_group_footer(metadata, 0, "f.parquet", 11)


def test_a_long_value_read_from_a_dictionary_names_its_row() -> None:
    frame = pl.DataFrame({"id": ["a", "b", "c"],
                          "input": ["short", "z" * (MAX_FIELD_BYTES + 1), "short"]})
    with pytest.raises(DatasetError,
                       match=r"^f\.parquet: row 6: input holds 1 MiB; a field holds at most"):
        check_read(frame, "f.parquet", 5, limit=1 << 30, what="the dataset", rule="r",
                   field_limit=MAX_FIELD_BYTES)


def test_the_row_where_the_data_passes_the_bound_is_named() -> None:
    """A dictionary column read by polars shares its one stored value (a few kilobytes in
    memory), but counts as the plain data it would become."""
    table = pa.table({"input": repeated("q" * 10_000, 50)})
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    categorical = frame.schema["input"]
    assert isinstance(categorical, pl.Categorical)  # Arrow's dictionary type is kept
    for shown in (frame, frame.with_columns(pl.col("input").cast(pl.String))):
        with pytest.raises(DatasetError, match=r"^f: row 11: the dataset passes 100,000 bytes "
                                               r"here once read \(500,\d+ bytes in all; r, "):
            check_read(shown, "f", 1, limit=100_000, what="the dataset", rule="r",
                       field_limit=MAX_FIELD_BYTES)


def test_nested_text_counts_too() -> None:
    frame = pl.DataFrame({"input": [{"a": "x" * 600, "b": ["y" * 499]},
                                    {"a": "x" * 600, "b": ["y" * 500]}]})
    with pytest.raises(DatasetError, match=r"^f: row 2: input holds 1,100 bytes"):
        check_read(frame, "f", 1, limit=1 << 30, what="w", rule="r", field_limit=1_099)


def test_json_values_are_counted_before_parsing() -> None:
    text = "[" + "[]," * 1000 + "[]]"
    assert values_over(text, 5000) == 0
    assert values_over(text, 1000) == 2003
    assert values_over(text.encode(), 1000) == 2003
    assert values_over('"short"', 1) == 0  # no longer than the bound: nothing counted
    with pytest.raises(JsonProblem, match=r"up to 2,003 values; at most 1,000 are read"):
        loads(text, max_values=1000)
    assert len(loads(text)) == 1001


def test_a_golden_field_over_the_bound_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    rows = [{"input": "fine", "expected": "refund"},
            {"input": "é" * (MAX_FIELD_BYTES // 2 + 1), "expected": "refund"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(DatasetError, match=r"cases\.jsonl: line 2: input holds 1,048,578 "
                                           r"bytes; at most 1,048,576 are read"):
        load_golden(path, LABELS)


def test_a_record_line_over_the_bound_is_found_before_it_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from decflow.data.records import blocks as record_blocks

    monkeypatch.setattr(record_blocks, "MAX_RECORD_LINE_BYTES", 100)
    data = b'{"a": 1}\n{"b": 2}\n' + b"x" * 150 + b"\n{}\n"
    with (BlockReader(io.BytesIO(data)) as reader,  # type: ignore[arg-type]
          pytest.raises(LongLine) as caught):
        reader.read(24, whole_lines=True)
    assert caught.value.before == 2
    with BlockReader(io.BytesIO(data)) as reader:  # type: ignore[arg-type]
        assert reader.read(8, whole_lines=True) == b'{"a": 1}\n'
