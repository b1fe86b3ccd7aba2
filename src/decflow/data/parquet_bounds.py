"""Checks of a Parquet row group against the bounds of `decflow.data.bounds`: before it is
read, from its entry in the file's footer (rows, values, decompressed bytes); once polars
has read it (a string column read from a dictionary shares the stored value, so reading
costs little), the size it would have as plain data, before anything copies it: per field
and in all. Over a bound is one `DatasetError` naming the file and the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from decflow.data.bounds import MAX_GROUP_BYTES, MAX_GROUP_ROWS, MAX_GROUP_VALUES, mib
from decflow.errors import DatasetError


def check_group_footer(metadata: Any, index: int, path: str, first_row: int) -> None:
    """Row group `index` of a Parquet file (pyarrow's `FileMetaData`) is small enough to
    read at once: its rows, its values and its decompressed bytes, from the footer."""
    group = metadata.row_group(index)
    rows = group.num_rows
    where = f"{path}: rows {first_row:,}-{first_row + rows - 1:,} (row group {index + 1})"
    fix = ("; write the file with smaller row groups (e.g. pyarrow's or polars' "
           "row_group_size)")
    if rows > MAX_GROUP_ROWS:
        raise DatasetError(f"{where}: {rows:,} rows in one row group; at most "
                           f"{MAX_GROUP_ROWS:,} are read at once{fix}")
    chunks = [group.column(i) for i in range(group.num_columns)]
    values = sum(chunk.num_values for chunk in chunks)
    if values > MAX_GROUP_VALUES:
        raise DatasetError(f"{where}: {values:,} values in one row group; at most "
                           f"{MAX_GROUP_VALUES:,} are read at once{fix}")
    size = sum(chunk.total_uncompressed_size for chunk in chunks)
    if size > MAX_GROUP_BYTES:
        raise DatasetError(f"{where}: {mib(size)} once decompressed; at most "
                           f"{mib(MAX_GROUP_BYTES)} are read at once{fix}")


def large_columns(metadata: Any, index: int, field_limit: int) -> set[str]:
    """Top-level columns of row group `index` that may hold a value over `field_limit`
    bytes: a value is never longer than its decompressed column chunk (plain values are in
    it; a dictionary-encoded one is in its dictionary page)."""
    group = metadata.row_group(index)
    found = set()
    for i in range(group.num_columns):
        chunk = group.column(i)
        if chunk.total_uncompressed_size > field_limit:
            found.add(chunk.path_in_schema.split(".")[0])
    return found


def _value_bytes(expr: pl.Expr, dtype: Any) -> pl.Expr | None:
    """Bytes of text (and binary) in each row's value of a column of `dtype`, nested
    values included; None for a type without any."""
    if dtype == pl.String:
        return expr.str.len_bytes().cast(pl.UInt64)
    if isinstance(dtype, pl.Categorical | pl.Enum):  # a dictionary column kept as one
        return expr.cat.len_bytes().cast(pl.UInt64)
    if dtype == pl.Binary:
        return expr.bin.size().cast(pl.UInt64)
    if isinstance(dtype, pl.Struct):
        parts = [part for field in dtype.fields
                 if (part := _value_bytes(expr.struct.field(field.name), field.dtype))
                 is not None]
        return pl.sum_horizontal(parts) if parts else None
    if isinstance(dtype, pl.List | pl.Array):
        inner = _value_bytes(pl.element(), dtype.inner)
        if inner is None:
            return None
        as_list = expr if isinstance(dtype, pl.List) else expr.arr.to_list()
        return as_list.list.eval(inner).list.sum()
    return None


def _holds_categories(dtype: Any) -> bool:
    if isinstance(dtype, pl.Categorical | pl.Enum):
        return True
    if isinstance(dtype, pl.Struct):
        return any(_holds_categories(field.dtype) for field in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _holds_categories(dtype.inner)
    return False


def _categories_expanded(frame: pl.DataFrame) -> int:
    """The text of categorical columns as plain data (polars' size counts each category
    once: a Parquet dictionary column written by Arrow is read as one)."""
    sizes = [size for name, dtype in frame.schema.items() if _holds_categories(dtype)
             and (size := _value_bytes(pl.col(name), dtype)) is not None]
    if not sizes:
        return 0
    return int(frame.select(pl.sum_horizontal(sizes).sum()).item() or 0)


def check_read(frame: pl.DataFrame, path: str, first_row: int, *, limit: int, what: str,
               rule: str, field_limit: int, columns: Sequence[str] | None = None) -> None:
    """`frame` (rows from `first_row` on, `what` in the message) as plain data stays within
    `limit` bytes (`rule` says which bound that is), and each value of `columns` (all by
    default) within `field_limit`. polars knows its
    size without a pass over the data; the values are measured only when needed."""
    names = frame.columns if columns is None else [c for c in columns if c in frame.columns]
    sizes = {name: size for name in names
             if (size := _value_bytes(pl.col(name), frame.schema[name])) is not None}
    if sizes:
        longest = frame.select([size.max().alias(name) for name, size in sizes.items()]).row(0)
        for name, most in zip(sizes, longest, strict=True):
            if isinstance(most, int) and most > field_limit:
                row = int(frame.select(sizes[name].arg_max()).item())
                raise DatasetError(
                    f"{path}: row {first_row + row:,}: {name} holds {mib(most)}; a "
                    f"field holds at most {mib(field_limit)} (SECURITY.md)")
    total = int(frame.estimated_size()) + _categories_expanded(frame)
    if total <= limit:
        return
    over = 0
    every = [size for name, dtype in frame.schema.items()
             if (size := _value_bytes(pl.col(name), dtype)) is not None]
    if every:
        running = frame.select(pl.sum_horizontal(every).cum_sum().alias("bytes"))["bytes"]
        past = (running > limit).arg_true()
        over = int(past[0]) if past.len() else 0
    raise DatasetError(
        f"{path}: row {first_row + over:,}: {what} passes {mib(limit)} here once read "
        f"({mib(total)} in all; {rule}, SECURITY.md)")
