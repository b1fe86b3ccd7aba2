"""Production records: JSONL, JSON lists and Parquet → normalized polars tables.

A source is one file, a folder (every `.jsonl`/`.json`/`.parquet` below it, sorted by
relative path) or a glob. Each file is a partition; a Parquet file is read in row-group
batches so memory stays bounded by the batch, not the file.

Rules are DecGuard 0.1's record table (`records.rules.normalize_record`). JSONL is parsed by Arrow
with a typed schema and checked with polars expressions; whenever that fast path cannot be
sure (a line Arrow cannot type, blank lines, metadata whose numbers could be int or float)
the partition goes through the strict per-record parser instead, which is also what words
every error: the vectorized checks only find the first bad row, and the strict parser then
validates that one line and says what is wrong with it. Either way the first bad line in
file order is the one reported, as `<file>: line N: <message>` (`record N` for JSON lists,
`row N` for Parquet).

Ids are unique within a batch by an exact check and across batches by one sort of their
64-bit hashes. A duplicate is reported before any invalid record that follows it: before a
JSONL line error the lines above it in its chunk are checked too. (In Parquet, an invalid
row in the same 250k-row batch as a duplicate's second occurrence is reported first even
when it comes after it.)

Parquet lives in `records.parquet`, the vectorized checks in `records.checks`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as pa_json

from decflow.data.bounds import MAX_JSON_FILE_VALUES, long_line
from decflow.data.records.blocks import Block, BlockReader, LineStats, LongLine, line_stats
from decflow.data.records.bytes import check_chunk, may_nest_deeper, opens_with_object
from decflow.data.records.checks import NeedStrict, vectorized_table
from decflow.data.records.parquet import parquet_batches
from decflow.data.records.rules import (
    BOOL_FIELDS,
    INVALID_SEGMENT,
    NUMBER_FIELDS,
    STRING_FIELDS,
    RecordInvalid,
    RecordSpec,
    explain_jsonl_line,
    invalid_json_at,
    loads_strict,
    normalize_record,
    record_schema,
    segment_column,
    segment_display,
    segment_value,
)
from decflow.data.records.units import (
    WHITESPACE,
    FilePart,
    list_partitions,
    location,
    open_records,
    source_hash,
    suffix,
)
from decflow.errors import DatasetError
from decflow.untrusted import quote

__all__ = [
    "Batch",
    "RecordReader",
    "RecordSpec",
    "list_partitions",
    "normalize_objects",
    "record_schema",
    "segment_column",
    "segment_display",
    "segment_value",
    "source_hash",
]


# -- partitions ----------------------------------------------------------------------------


class _LineError(DatasetError):
    """A JSONL line breaks a rule; `line` lets the reader look for an earlier duplicate id
    in the same chunk before reporting it."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _id_hashes(ids: pl.Series) -> np.ndarray:
    """64-bit hashes of ids (`polars` hashing with a fixed seed: equal across processes of
    the same polars version, which the records stage key includes)."""
    return ids.hash(seed=0x5EED).to_numpy()


# -- reading one partition -------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """A validated slice of one partition, in file order."""

    path: Path | str
    table: pl.DataFrame


class RecordReader:
    """Reads the partitions of a source in order, validating every record, one batch at a
    time (a JSONL or JSON file is one batch; Parquet row groups are grouped into batches)."""

    def __init__(
        self,
        source: str | Path | Sequence[str | Path],
        spec: RecordSpec,
        *,
        parts: Sequence[FilePart] | None = None,
        offset: int = 0,
        texts: bool = True,
        beside: bool = False,
    ) -> None:
        """`parts` (instead of the whole `source`) reads only those files or Parquet row
        groups, numbering records from `offset + 1` (one unit of a partitioned check). Not
        `texts`: JSONL batches leave the input, backend, model and metadata texts null (the
        statistics read none of them). `beside`: other readers run beside this one on the
        cores, so Arrow parses each JSONL block on this thread alone (its own threads only
        competed with them: 1M records 2.7 s instead of 2.95)."""
        self.spec = spec
        self.texts = texts
        self.beside = beside
        self.parts = (
            list(parts) if parts is not None
            else [FilePart(str(f)) for f in list_partitions(source)]
        )
        self.files = list(dict.fromkeys(location(p.path) for p in self.parts))
        # A unit of a planned check is read, not hashed: its files were hashed by the plan.
        self._hashing = parts is None
        self.digests: list[str] = []
        self.offset = offset
        self.n_records = offset
        # Sorted 64-bit hashes of each batch's ids (8 bytes per record): ids are unique
        # within a batch by an exact check where hashes repeat, across batches by sorting
        # these once.
        self._hashes: list[np.ndarray] = []
        self._watch: set[int] | None = None
        self._hits: list[tuple[str, Path | str, str]] = []
        # The first unusable segment value per key, raised once all records are valid.
        self._segment_problems: dict[str, str] = {}

    @property
    def dataset_hash(self) -> str:
        return source_hash(self.files, self.digests)

    def batches(self) -> Iterator[Batch]:
        try:
            yield from self._read_files()
        except DatasetError:
            self._raise_duplicates()  # a duplicate id earlier in the files comes first
            raise
        self._raise_duplicates()
        for key in self.spec.segments:
            if key in self._segment_problems:
                raise DatasetError(self._segment_problems[key])

    def _read_files(self) -> Iterator[Batch]:
        for part in self.parts:
            path = location(part.path)
            digest = hashlib.sha256()
            if suffix(path) == ".parquet":
                if self._hashing:
                    _hash_file(path, digest)
                batches = parquet_batches(path, self.spec, part.rows)
                for table, first_row in batches:
                    yield self._accept(path, table, lambda i, f=first_row: f"row {f + i}")
            elif suffix(path) == ".json":
                data = _read_bytes(path)
                if self._hashing:
                    digest.update(data)
                yield self._accept(path, self._json_list(data, path), lambda i: f"record {i + 1}")
            else:
                chunks = _jsonl_chunks(
                    path, digest if self._hashing else None, part.byte_range, part.first_row
                )
                for block, first_line, stats in chunks:
                    check_chunk(block, str(path), first_line)
                    try:
                        table, lines = self._jsonl(block, path, first_line, stats)
                    except _LineError as error:
                        self._raise_duplicate_before(path, block, first_line, error.line)
                        raise
                    yield self._accept(path, table, lambda i, n=lines: f"line {n[i]}")
            self.digests.append(digest.hexdigest())

    def unit_batches(self) -> Iterator[Batch]:
        """The validated batches of the parts, with ids checked within each batch only:
        one unit of a partitioned check, whose ids the merge checks across all units."""
        yield from self._read_files()

    def id_hashes(self) -> np.ndarray:
        """Sorted 64-bit hashes of every id accepted so far."""
        if not self._hashes:
            return np.empty(0, dtype=np.uint64)
        return np.sort(np.concatenate(self._hashes), kind="stable")  # merges sorted runs

    def segment_problems(self) -> dict[str, str]:
        """The first unusable segment value per key seen so far (key → message)."""
        return dict(self._segment_problems)

    def read_all(self) -> pl.DataFrame:
        """Every record of the source in one table (for small inputs and tests)."""
        frames = [batch.table for batch in self.batches()]
        return pl.concat(frames) if frames else pl.DataFrame(schema=self.spec.schema)

    # -- shared finishing: positions, ids, duplicates ------------------------------------

    def _accept(self, path: Path | str, table: pl.DataFrame, where: Any) -> Batch:
        offset = self.n_records
        table = table.with_columns(
            (pl.int_range(1, table.height + 1, dtype=pl.Int64) + offset).alias("position")
        )
        if table["id"].null_count():
            table = table.with_columns(
                pl.coalesce(
                    pl.col("id"), pl.lit("record-") + pl.col("position").cast(pl.String)
                ).alias("id")
            )
        ids = table["id"]
        hashes = _id_hashes(ids)
        ordered = np.sort(hashes)
        if ordered.size > 1 and (ordered[1:] == ordered[:-1]).any():  # equal ids hash equal
            repeated = ids.is_duplicated() & ~ids.is_first_distinct()
            if repeated.any():
                index = int(repeated.arg_true()[0])
                first = int((ids == ids[index]).arg_true()[0])
                raise DatasetError(
                    f"{path}: {where(index)}: duplicate record id {quote(ids[index])} "
                    f"(first at {where(first)})"
                )
        self._note_segment_problems(path, table, where)
        if self._watch is not None:
            # the watched hashes in the same unsigned dtype, compared by sorting: numpy's
            # table method overflows on uint64 values above 2**63 (numpy 2.0)
            watched = np.fromiter(self._watch, dtype=hashes.dtype, count=len(self._watch))
            for i in np.flatnonzero(np.isin(hashes, watched, kind="sort")).tolist():
                self._hits.append((ids[i], path, where(i)))
        else:
            self._hashes.append(ordered)
        self.n_records += table.height
        return Batch(path, table.select(list(self.spec.schema)))

    def _note_segment_problems(self, path: Path | str, table: pl.DataFrame, where: Any) -> None:
        for key in self.spec.segments:
            if key in self._segment_problems:
                continue
            bad = table[segment_column(key)].str.starts_with(INVALID_SEGMENT).arg_true()
            if bad.len():
                i = int(bad[0])
                reason = table[segment_column(key)][i].removeprefix(INVALID_SEGMENT)
                self._segment_problems[key] = (
                    f"{path}: {where(i)}: record {quote(table['id'][i])}: metadata.{key} {reason}"
                )

    def _raise_duplicates(self) -> None:
        """Raise for the first id that repeats across batches. Only equal hashes are
        candidates; the files are read again to confirm them and name both places."""
        if self._watch is not None or len(self._hashes) < 2:
            return
        ordered = np.sort(np.concatenate(self._hashes))
        candidates = ordered[1:][ordered[1:] == ordered[:-1]]
        if not candidates.size:
            return
        again = RecordReader(self.files, self.spec, parts=self.parts, offset=self.offset)
        again._watch = set(candidates.tolist())
        first: dict[str, tuple[Path | str, str]] = {}
        try:
            for _ in again._read_files():
                for record_id, path, where in again._hits:
                    if record_id in first:
                        seen_path, seen_where = first[record_id]
                        place = seen_where if seen_path == path else f"{seen_where} of {seen_path}"
                        raise DatasetError(
                            f"{path}: {where}: duplicate record id {quote(record_id)} "
                            f"(first at {place})"
                        )
                    first[record_id] = (path, where)
                again._hits.clear()
        except DatasetError as error:
            if "duplicate record id" in str(error):
                raise
            # a later invalid record: the duplicate check only covers what came before it

    def _raise_duplicate_before(
        self, path: Path | str, data: Block, first_line: int, bad_line: int
    ) -> None:
        """Before reporting a bad line, report a duplicate id on an earlier line of the same
        chunk (those lines are valid; they were never accepted as a batch)."""
        ids: list[tuple[str, int]] = []
        for number, text in enumerate(data.split(b"\n")[: bad_line - first_line], first_line):
            if text.strip(WHITESPACE):
                record_id = loads_strict(text).get("id")
                position = self.n_records + len(ids) + 1
                ids.append((record_id or f"record-{position}", number))
        if not ids:
            return
        earlier = np.concatenate(self._hashes) if self._hashes else np.empty(0, np.uint64)
        hashes = _id_hashes(pl.Series([i for i, _ in ids], dtype=pl.String))
        maybe_earlier = np.isin(hashes, earlier, kind="sort")
        seen: dict[str, int] = {}
        for (record_id, number), candidate in zip(ids, maybe_earlier.tolist(), strict=True):
            place = f"line {seen[record_id]}" if record_id in seen else None
            if place is None and candidate:
                place = self._first_place(record_id, path)
            if place is not None:
                raise DatasetError(
                    f"{path}: line {number}: duplicate record id {quote(record_id)} "
                    f"(first at {place})"
                )
            seen[record_id] = number

    def _first_place(self, record_id: str, path: Path | str) -> str | None:
        """Where an id first occurs among the batches accepted so far (re-read)."""
        again = RecordReader(self.files, self.spec, parts=self.parts, offset=self.offset)
        again._watch = set(_id_hashes(pl.Series([record_id], dtype=pl.String)).tolist())
        try:
            for _ in again._read_files():
                for found, where_path, where in again._hits:
                    if found == record_id:
                        return where if where_path == path else f"{where} of {where_path}"
                again._hits.clear()
                if again.n_records >= self.n_records:
                    return None
        except DatasetError:
            return None
        return None

    # -- formats ----------------------------------------------------------------------------

    def _json_list(self, data: bytes, path: Path | str) -> pl.DataFrame:
        try:
            items = loads_strict(_decode(data, path), max_values=MAX_JSON_FILE_VALUES)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: "
                               f"{exc.msg}") from None
        except ValueError as exc:
            raise DatasetError(f"{path}: invalid JSON: {exc}") from None
        if not isinstance(items, list):
            raise DatasetError(f"{path}: a .json record file must hold a list of records")
        return normalize_objects(items, self.spec, str(path), offset=self.n_records)

    def _jsonl(
        self, data: Block, path: Path | str, first_line: int, stats: LineStats
    ) -> tuple[pl.DataFrame, list[int] | _Consecutive]:
        if opens_with_object(data) and not may_nest_deeper(data, longest_line=stats.longest):
            rows = range(stats.lines) if stats.plain else _arrow_rows(data)
            fast = _fast_jsonl(data, path, self.spec, first_line, rows, self.texts,
                               threads=not self.beside)
            if fast is not None:
                if isinstance(rows, range):
                    return fast, _Consecutive(first_line)
                return fast, [first_line + i for i in rows]
        return _strict_jsonl(data, path, self.spec, self.n_records, first_line)


def normalize_objects(
    items: Sequence[Any], spec: RecordSpec, where: str, *, offset: int = 0
) -> pl.DataFrame:
    """Validate already parsed records (a JSON list, a report's stored records); errors
    name `<where>: record N`. Ids must be unique."""
    rows = []
    first: dict[str, int] = {}
    for i, obj in enumerate(items):
        try:
            row = normalize_record(obj, spec, offset + i + 1)
        except RecordInvalid as exc:
            raise DatasetError(f"{where}: record {i + 1}: {exc}") from None
        if row["id"] in first:
            raise DatasetError(
                f"{where}: record {i + 1}: duplicate record id {quote(row['id'])} "
                f"(first at record {first[row['id']]})"
            )
        first[row["id"]] = i + 1
        rows.append(row)
    if not rows:
        return pl.DataFrame(schema=spec.schema)
    return pl.DataFrame(rows, schema=spec.schema, orient="row")


class _Consecutive:
    """Row i of a chunk is on line first + i (a chunk without blank lines)."""

    def __init__(self, first: int) -> None:
        self.first = first

    def __getitem__(self, index: int) -> int:
        return self.first + index


JSONL_CHUNK_BYTES = 16 << 20


def _jsonl_chunks(
    path: Path | str, digest: Any, byte_range: tuple[int, int] | None = None, first_line: int = 1
) -> Iterator[tuple[bytearray, int, LineStats]]:
    """Whole lines of a JSONL file (or of its bytes `byte_range`, which start at line
    `first_line`) in blocks of about `JSONL_CHUNK_BYTES`, with the number of each block's
    first line and its `LineStats`; feeds the bytes to `digest` on the way. A block is
    valid until the next one is read (`BlockReader`)."""
    start, stop = byte_range if byte_range is not None else (0, None)
    with open_records(path) as handle, BlockReader(handle) as reader:
        if start:
            handle.seek(start)
        position = start
        while stop is None or position < stop:
            size = JSONL_CHUNK_BYTES if stop is None else min(JSONL_CHUNK_BYTES, stop - position)
            try:
                block = reader.read(size, whole_lines=stop is None or position + size < stop)
            except LongLine as exc:
                raise DatasetError(long_line(path, first_line + exc.before)) from None
            if not block:
                break
            position += len(block)
            if digest is not None:
                digest.update(block)
            stats = line_stats(block)
            yield block, first_line, stats
            first_line += stats.lines


def _hash_file(path: Path | str, digest: Any) -> None:
    with open_records(path) as handle:
        while block := handle.read(JSONL_CHUNK_BYTES):
            digest.update(block)


def _read_bytes(path: Path | str) -> bytes:
    with open_records(path) as handle:
        return handle.read()


def _decode(data: Block, path: Path | str) -> str:
    check_chunk(data, str(path), 1)
    return data.decode("utf-8")


def _strict_jsonl(
    data: Block, path: Path | str, spec: RecordSpec, offset: int, first_line: int = 1
) -> tuple[pl.DataFrame, list[int]]:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, line in enumerate(_decode(data, path).split("\n"), start=first_line):
        if not line.strip(WHITESPACE.decode()):
            continue
        try:
            obj = loads_strict(line)
        except ValueError as exc:
            raise _LineError(f"{path}: {invalid_json_at(number, exc)}", number) from None
        try:
            rows.append(normalize_record(obj, spec, offset + len(rows) + 1))
        except RecordInvalid as exc:
            raise _LineError(f"{path}: line {number}: {exc}", number) from None
        lines.append(number)
    table = pl.DataFrame(rows, schema=spec.schema, orient="row") if rows else pl.DataFrame(
        schema=spec.schema
    )
    return table, lines


def _arrow_schema(spec: RecordSpec) -> pa.Schema:
    fields = [pa.field(name, pa.string()) for name in STRING_FIELDS]
    fields += [pa.field(name, pa.float64()) for name in NUMBER_FIELDS]
    fields += [pa.field(name, pa.bool_()) for name in BOOL_FIELDS]
    fields.append(
        pa.field("probabilities", pa.struct([pa.field(lb, pa.float64()) for lb in spec.labels]))
    )
    return pa.schema(fields)


# Fields whose values only the report's inlined records show; Arrow's typed schema has
# validated them already when they are strings (or, for `input`, objects).
_TEXT_FIELDS = ("input", "backend", "model", "model_version")


def _arrow_rows(data: Block) -> list[int]:
    """The lines of a chunk that Arrow reads as rows, by index: all but those of spaces,
    tabs and carriage returns only, which it skips."""
    return [i for i, line in enumerate(data.split(b"\n")) if line.strip(b" \t\r")]


def _fast_jsonl(
    data: Block, path: Path | str, spec: RecordSpec, first_line: int, rows: Sequence[int],
    texts: bool = True, *, threads: bool = True,
) -> pl.DataFrame | None:
    """Arrow + polars path; None when the file needs the strict parser. `rows[i]`: the
    index in the chunk of the line Arrow's row i comes from. Not `texts`: the input,
    backend, model and metadata texts are left null (nothing but the inlined records of a
    small report reads them).

    Arrow splits a line holding two objects into two rows, so the rows match those lines
    only when there are as many of them; anything else goes to the strict parser, which
    numbers lines itself."""
    options = pa_json.ParseOptions(
        explicit_schema=_arrow_schema(spec), unexpected_field_behavior="infer"
    )
    try:
        arrow = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(data)),  # zero-copy: no second copy of the chunk
            read_options=pa_json.ReadOptions(block_size=1 << 20, use_threads=threads),
            parse_options=options,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if arrow.num_rows != len(rows) or not rows:
        return None
    if not texts:
        arrow = arrow.drop_columns([
            name for name in _TEXT_FIELDS if name in arrow.column_names
            and (pa.types.is_string(arrow.schema.field(name).type)
                 or pa.types.is_struct(arrow.schema.field(name).type))
        ])
    raw = pl.from_arrow(arrow)
    assert isinstance(raw, pl.DataFrame)
    try:
        bad, table = vectorized_table(raw, spec)
    except NeedStrict:
        return None
    if bad is not None:
        line = rows[bad]
        text = bytes(data.split(b"\n", line + 1)[line])
        problem = explain_jsonl_line(first_line + line, text, spec)
        if problem is None:
            return None
        raise _LineError(f"{path}: {problem}", first_line + line)
    assert table is not None
    if not texts:
        return table
    # The artifact keeps objects as JSON text. Re-encoded from Arrow's typed structs, a key
    # absent from one record but present in others reads as null (the same as missing for
    # segments), and ints that Arrow widened to floats read as floats.
    if "metadata" in raw.columns and isinstance(raw["metadata"].dtype, pl.Struct):
        table = table.with_columns(metadata_json=_encoded(raw["metadata"]).fill_null("{}"))
    if "input" in raw.columns and isinstance(raw["input"].dtype, pl.Struct):
        table = table.with_columns(input_json=_encoded(raw["input"]))
    return table


def _encoded(struct: pl.Series) -> pl.Series:
    return pl.select(
        pl.when(struct.is_not_null()).then(struct.struct.json_encode())
    ).to_series()


