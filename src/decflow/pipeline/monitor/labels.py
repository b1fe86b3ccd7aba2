"""Labels that arrive after their decisions (`decflow monitor --labels SOURCE`), and their
join to a monitor's stored predictions.

A labels partition is a `.parquet`, `.jsonl` or `.json` (a list) file of rows with `id`
(the decision's record id), `outcome` (one of the contract's labels; integers are
converted, as in records) and optionally `timestamp` (when the outcome became known, ISO
8601 with a timezone, or a timezone-aware Parquet timestamp); any other column is an
error naming it, a bad row an error naming file and row. It is kept as compact labels: the
id's stable hash, the outcome's label index, the timestamp and the arrival order (`seq`:
the partition's place in the order the monitor found labels partitions, then the row).

Joining: each decision takes the first label in arrival order (later ones for the same id
are counted as repeated and ignored; so is a label for a decision whose record carried its
outcome); a label whose decision has not arrived yet waits for it (pending). A labels
partition written again after it was read keeps its earlier labels first (`again`): a
rewrite can add labels, never replace one.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from decflow.data.bounds import (
    MAX_FIELD_BYTES,
    MAX_JSON_FILE_VALUES,
    MAX_JSON_VALUES,
    MAX_LABELS_BYTES,
    mib,
)
from decflow.data.parquet_bounds import check_group_footer
from decflow.data.records.id_hashes import stable_id_hashes
from decflow.data.records.rules import RecordInvalid, loads_strict, parse_timestamp
from decflow.data.records.units import Partition, location, open_records, suffix
from decflow.errors import DatasetError
from decflow.untrusted import quote

COLUMNS = ("id", "outcome", "timestamp")
ROW_BITS = 32  # seq = partition order << ROW_BITS | row
LABEL_SCHEMA = {"h": pl.Int64(), "outcome": pl.UInt8(),
                "timestamp": pl.Datetime("us", "UTC"), "seq": pl.Int64()}


def _bounded(partition: Partition) -> bytes:
    """The file's bytes, at most `MAX_LABELS_BYTES` of them (SECURITY.md)."""
    with open_records(location(partition.path)) as handle:
        data = handle.read(MAX_LABELS_BYTES + 1)
    if len(data) > MAX_LABELS_BYTES:
        raise DatasetError(f"{partition.path}: larger than {mib(MAX_LABELS_BYTES)}; a labels "
                           f"file holds at most that (SECURITY.md): split it in partitions")
    return data


def _parquet(data: bytes, path: str) -> pl.DataFrame:
    """A Parquet labels file, its row groups checked from the footer before any is read,
    and in all at most `MAX_LABELS_BYTES` decompressed."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    first, size = 1, 0
    for index in range(metadata.num_row_groups):
        check_group_footer(metadata, index, path, first)
        group = metadata.row_group(index)
        first += group.num_rows
        size += sum(group.column(i).total_uncompressed_size for i in range(group.num_columns))
    if size > MAX_LABELS_BYTES:
        raise DatasetError(f"{path}: {mib(size)} once decompressed; a labels file holds at "
                           f"most {mib(MAX_LABELS_BYTES)} (SECURITY.md)")
    return pl.read_parquet(io.BytesIO(data))


def _read(partition: Partition) -> tuple[pl.DataFrame, str]:
    """The file's rows as a table of its own columns, and how its rows are named."""
    data = _bounded(partition)
    kind = suffix(partition.path)
    try:
        if kind == ".parquet":
            return _parquet(data, partition.path), "row"
        if kind == ".jsonl":
            items = []
            for number, line in enumerate(data.splitlines(), 1):
                if line.strip():
                    items.append((number, _parsed(line, partition.path, f"line {number}")))
            return _objects(items, partition.path), "record"  # rows: the non-blank lines
        found = _parsed(data, partition.path, "file", MAX_JSON_FILE_VALUES)
        if not isinstance(found, list):
            raise DatasetError(f"{partition.path}: a labels .json file is a list of objects")
        return _objects(list(enumerate(found, 1)), partition.path, "record"), "record"
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{partition.path}: not a readable labels file ({exc})") from None


def _parsed(text: bytes, path: str, where: str, values: int = MAX_JSON_VALUES) -> Any:
    try:
        return loads_strict(text, values)
    except ValueError as exc:
        raise DatasetError(f"{path}: {where}: not valid JSON ({exc})") from None


def _objects(items: list[tuple[int, Any]], path: str, unit: str = "line") -> pl.DataFrame:
    """JSON labels as a table of the label columns (each checked: an object, no unknown
    field, strings where strings belong; integer outcomes converted)."""
    rows = []
    for number, item in items:
        where = f"{path}: {unit} {number}"
        if not isinstance(item, dict):
            raise DatasetError(f"{where}: a label is a JSON object")
        unknown = [name for name in item if name not in COLUMNS]
        if unknown:
            raise DatasetError(f"{where}: unknown field(s) {unknown} (labels have the fields "
                               "id, outcome and, optionally, timestamp)")
        for name, value in item.items():
            integer = isinstance(value, int) and not isinstance(value, bool)
            if value is not None and not isinstance(value, str) and not (
                    name == "outcome" and integer):
                raise DatasetError(f"{where}: {name}: must be a string")
        rows.append({name: None if item.get(name) is None else str(item[name])
                     for name in COLUMNS})
    return pl.DataFrame(rows, schema=dict.fromkeys(COLUMNS, pl.String))


def read_labels(partition: Partition, labels: Sequence[str], order: int) -> pl.DataFrame:
    """One labels partition as compact labels (`LABEL_SCHEMA`); `order` is its place in the
    arrival order."""
    table, unit = _read(partition)
    path = partition.path
    if table.height == 0:
        return pl.DataFrame(schema=LABEL_SCHEMA)
    unknown = [c for c in table.columns if c not in COLUMNS]
    if unknown:
        raise DatasetError(f"{path}: unknown column(s) {unknown} (labels have the columns "
                           "id, outcome and, optionally, timestamp)")
    for required in ("id", "outcome"):
        if required not in table.columns:
            raise DatasetError(f"{path}: no '{required}' column (labels have the columns id, "
                               "outcome and, optionally, timestamp)")
    ids, outcomes = table["id"], table["outcome"]
    if ids.dtype != pl.String:
        raise DatasetError(f"{path}: id: must be a string column, not {ids.dtype}")
    if outcomes.dtype.is_integer():
        outcomes = outcomes.cast(pl.String)
    missing = (ids.is_null() | (ids == "")).arg_true()
    if missing.len():
        raise DatasetError(f"{path}: {unit} {int(missing[0]) + 1}: id: required")
    long = (ids.str.len_bytes() > MAX_FIELD_BYTES).arg_true()
    if long.len():
        raise DatasetError(f"{path}: {unit} {int(long[0]) + 1}: id: longer than "
                           f"{mib(MAX_FIELD_BYTES)} (SECURITY.md)")
    known = outcomes.is_in(list(labels)).fill_null(False)
    if not known.all():
        row = int((~known).arg_true()[0])
        raise DatasetError(f"{path}: {unit} {row + 1}: outcome {quote(str(outcomes[row]))} is "
                           f"not one of the contract labels {list(labels)}")
    index = outcomes.replace_strict(list(labels), list(range(len(labels))),
                                    return_dtype=pl.UInt8)
    return pl.DataFrame({
        "h": stable_id_hashes(ids).view("int64"),
        "outcome": index,
        "timestamp": _timestamps(table, path, unit),
        "seq": (order << ROW_BITS) + pl.int_range(table.height, dtype=pl.Int64, eager=True),
    }, schema=LABEL_SCHEMA)


def _timestamps(table: pl.DataFrame, path: str, unit: str) -> pl.Series:
    if "timestamp" not in table.columns:
        return pl.Series("timestamp", [None] * table.height, dtype=pl.Datetime("us", "UTC"))
    column = table["timestamp"]
    if isinstance(column.dtype, pl.Datetime):
        if column.dtype.time_zone is None and column.null_count() < column.len():
            raise DatasetError(f"{path}: timestamp: must include a timezone (the Parquet "
                               "column is a naive timestamp)")
        return column.dt.convert_time_zone("UTC").cast(pl.Datetime("us", "UTC"))
    if column.dtype not in (pl.String, pl.Null):
        raise DatasetError(f"{path}: timestamp: must be an ISO 8601 string or a timestamp")
    moments = []
    for row, text in enumerate(column.to_list(), 1):
        try:
            moments.append(None if text is None else parse_timestamp(text))
        except RecordInvalid as exc:
            problem = str(exc).splitlines()[-1].strip()
            raise DatasetError(f"{path}: {unit} {row}: {problem}") from None
    return pl.Series("timestamp", moments, dtype=pl.Datetime("us", "UTC"))


@dataclass(frozen=True)
class Joined:
    """Predictions with their correctness from inline outcomes or labels (`correct`: -1
    still unknown; `labelled`: it came from a label), and what the labels did: joined to a
    decision, repeated (a second label, or one for a decision whose record had its
    outcome) or pending (no decision yet)."""

    predictions: pl.DataFrame
    joined: int
    repeated: int
    pending: int


def first_labels(labels: pl.DataFrame) -> pl.DataFrame:
    """The first label of each id, in arrival order (the one that counts)."""
    return labels.sort("seq").unique("h", keep="first", maintain_order=True)


def again(earlier: pl.DataFrame, rewritten: pl.DataFrame) -> pl.DataFrame:
    """A labels partition read again after it was written again, as the monitor keeps it:
    the labels of its earlier reading, their arrival order unchanged (a first label stays
    the first), then the rewritten file's labels not among them (later in arrival order: one
    for a decision labelled before is a repeat, ignored; an unchanged one is not kept twice)."""
    added = rewritten.join(earlier.select("h", "outcome"), on=["h", "outcome"], how="anti")
    return pl.concat([earlier, added])


def with_correctness(predictions: pl.DataFrame, first: pl.DataFrame) -> pl.DataFrame:
    """`predictions` with `correct` (inline, else from `first`: the first label of each id,
    `first_labels`) and `labelled` (it came from a label)."""
    found = predictions.join(first.select("h", "outcome"), on="h", how="left")
    inline = found["correct"] >= 0
    labelled = ~inline & found["outcome"].is_not_null()
    correct = (pl.when(inline).then(found["correct"])
               .when(labelled).then((found["selected"] == found["outcome"]).cast(pl.Int8))
               .otherwise(-1))
    return found.with_columns(correct=correct, labelled=labelled).drop("outcome")


def join_labels(predictions: pl.DataFrame, labels: pl.DataFrame) -> Joined:
    """Each prediction's correctness: inline if its record had an outcome, else from the
    first label of its id in arrival order."""
    first = first_labels(labels)
    result = with_correctness(predictions, first)
    joined = int(result["labelled"].sum())
    pending = first.height - int(first["h"].is_in(predictions["h"].implode()).sum())
    return Joined(result, joined, labels.height - joined - pending, pending)
