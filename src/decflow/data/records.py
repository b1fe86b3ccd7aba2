"""Production records: JSONL, JSON lists and Parquet → normalized polars tables.

A source is one file, a folder (every `.jsonl`/`.json`/`.parquet` below it, sorted by
relative path) or a glob. Each file is a partition; a Parquet file is read in row-group
batches so memory stays bounded by the batch, not the file.

Rules are DecGuard 0.1's record table (see `normalize_record`). JSONL is parsed by Arrow
with a typed schema and checked with polars expressions; whenever that fast path cannot be
sure (a line Arrow cannot type, blank lines, metadata whose numbers could be int or float)
the partition goes through the strict per-record parser instead, which is also what words
every error: the vectorized checks only find the first bad row, and the strict parser then
validates that one line and says what is wrong with it. Either way the first bad line in
file order is the one reported, as `<file>: line N: <message>` (`record N` for JSON lists,
`row N` for Parquet).

Ids are unique within a batch by an exact check and across batches by one sort of their
64-bit hashes; a duplicate is reported before any invalid record in a later batch, but an
invalid record in the same batch (a 16 MB JSONL chunk, a Parquet batch) as a duplicate's
second occurrence is reported first even when it comes after it.

Differences from DecGuard, on purpose: `null` counts as "not given" for every optional
field (DecGuard rejects `metadata: null`), and booleans are never accepted where numbers
belong (DecGuard's lax parsing takes `latency_ms: true`).
"""

from __future__ import annotations

import ast
import glob
import hashlib
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from decflow.errors import DatasetError

RECORD_FIELDS = (
    "id",
    "timestamp",
    "decision",
    "input",
    "probabilities",
    "selected",
    "confidence",
    "backend",
    "model",
    "model_version",
    "outcome",
    "outcome_correct",
    "latency_ms",
    "cost",
    "action",
    "fallback",
    "metadata",
)
ACTIONS = ("accept", "abstain", "fallback", "human_review")
SUFFIXES = (".jsonl", ".json", ".parquet")
PARQUET_BATCH_ROWS = 250_000
_STRING_FIELDS = ("id", "timestamp", "decision", "backend", "model", "model_version", "action")
_NUMBER_FIELDS = ("confidence", "latency_ms", "cost")
_BOOL_FIELDS = ("outcome_correct", "fallback")
_NO_TIMEZONE = "timestamp: must include a timezone"
_NOT_ISO = "timestamp: must be an ISO 8601 timestamp"


def segment_column(key: str) -> str:
    """Column of the normalized table holding the segment token of `metadata[key]`."""
    return f"segment:{key}"


def record_schema(labels: Sequence[str], segments: Sequence[str]) -> dict[str, pl.DataType]:
    """Columns of the normalized `records` table, in order.

    `position` is the 1-based record number across all partitions; `input_text` or
    `input_json` holds the input; `probabilities` is a struct with one field per label in
    contract order; `outcome_correct` is derived from `outcome` when that is given;
    `segment:<key>` holds a type-tagged token of `metadata[key]` (see `segment_token`).
    """
    schema: dict[str, pl.DataType] = {
        "position": pl.Int64(),
        "id": pl.String(),
        "timestamp": pl.Datetime("us", "UTC"),
        "input_text": pl.String(),
        "input_json": pl.String(),
        "probabilities": pl.Struct({label: pl.Float64() for label in labels}),
        "selected": pl.String(),
        "confidence": pl.Float64(),
        "backend": pl.String(),
        "model": pl.String(),
        "model_version": pl.String(),
        "outcome": pl.String(),
        "outcome_correct": pl.Boolean(),
        "latency_ms": pl.Float64(),
        "cost": pl.Float64(),
        "action": pl.String(),
        "fallback": pl.Boolean(),
        "metadata_json": pl.String(),
    }
    for key in segments:
        schema[segment_column(key)] = pl.String()
    return schema


@dataclass(frozen=True)
class RecordSpec:
    """What validation needs from the contract."""

    decision: str
    labels: tuple[str, ...]
    tolerance: float
    segments: tuple[str, ...] = ()

    @classmethod
    def from_contract(cls, contract: Any) -> RecordSpec:
        return cls(
            decision=contract.decision.name,
            labels=tuple(contract.decision.labels),
            tolerance=float(contract.evaluation.probability_tolerance),
            segments=tuple(key.strip() for key in contract.production.segments),
        )

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return record_schema(self.labels, self.segments)


class _Invalid(Exception):
    """One record breaks a rule; the message is completed with file and line."""


# -- segment tokens --------------------------------------------------------------------------

MISSING_TOKEN = "NoneType:"


def segment_token(value: Any) -> str:
    """`<type name>:<repr>`: groups are distinct by type (1, "1" and true are three groups)
    and tokens sort by type name then repr, as DecGuard orders segments (missing first)."""
    if value is None:
        return MISSING_TOKEN
    return f"{type(value).__name__}:{value!r}"


def segment_value(token: str) -> Any:
    """The JSON value a token stands for (None for a missing key)."""
    kind, _, text = token.partition(":")
    if kind == "NoneType":
        return None
    if kind == "float":
        return float(text)
    # str, int and bool reprs are Python literals
    return ast.literal_eval(text)


def segment_display(token: str) -> str:
    """How a segment value is shown in check names: `str(value)`, `<missing>` if absent."""
    value = segment_value(token)
    return "<missing>" if value is None else str(value)


def _check_segment_value(key: str, value: Any) -> None:
    if isinstance(value, dict | list):
        raise _Invalid(
            f"metadata.{key} must be a string, number, boolean or null when used as a segment"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise _Invalid(f"metadata.{key} must be finite")


# -- the strict per-record parser ------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_timestamp(text: str) -> datetime:
    """ISO 8601 with a timezone (`Z` allowed); raises `_Invalid` otherwise."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _Invalid(f"invalid production record:\n  {_NOT_ISO}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise _Invalid(f"invalid production record:\n  {_NO_TIMEZONE}")
    return parsed


def _field_problems(obj: dict[str, Any]) -> list[str]:
    problems = [f"{k}: unknown field (check the spelling)" for k in obj if k not in RECORD_FIELDS]
    for name in ("decision", "probabilities", "selected"):
        if obj.get(name) is None:
            problems.append(f"{name}: required field is missing")
    for name in _STRING_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], str):
            problems.append(f"{name}: must be a string")
    if obj.get("id") == "":
        problems.append("id: must be a non-empty string")
    for name in ("selected", "outcome"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str) and not (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            problems.append(f"{name}: must be a string (integers are converted)")
    for name in _NUMBER_FIELDS:
        value = obj.get(name)
        if value is None:
            continue
        if not _is_number(value):
            problems.append(f"{name}: must be a number")
        elif not math.isfinite(value):
            problems.append(f"{name}: must be a finite number")
        elif name != "confidence" and value < 0:
            problems.append(f"{name}: must be greater than or equal to 0")
    for name in _BOOL_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], bool):
            problems.append(f"{name}: must be true or false")
    if obj.get("input") is not None and not isinstance(obj["input"], str | dict):
        problems.append("input: must be a string or a JSON object")
    if obj.get("probabilities") is not None and not isinstance(obj["probabilities"], dict):
        problems.append("probabilities: must be a JSON object of label probabilities")
    if obj.get("metadata") is not None and not isinstance(obj["metadata"], dict):
        problems.append("metadata: must be a JSON object")
    action = obj.get("action")
    if isinstance(action, str) and action not in ACTIONS:
        problems.append("action: must be one of 'accept', 'abstain', 'fallback', 'human_review'")
    return problems


def check_probabilities(probabilities: dict[str, Any], spec: RecordSpec) -> list[float]:
    """Exact labels, numbers that are finite and non-negative, fsum within tolerance of 1.
    Returns the values in contract order; raises `_Invalid` with DecGuard's wording."""
    missing = [label for label in spec.labels if label not in probabilities]
    unknown = [key for key in probabilities if key not in spec.labels]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing labels {missing}")
        if unknown:
            parts.append(f"unknown labels {unknown}")
        raise _Invalid("probabilities do not match the contract labels: " + "; ".join(parts))
    values = []
    for label in spec.labels:
        value = probabilities[label]
        if not _is_number(value):
            raise _Invalid(f"probability of '{label}' must be a number, got {json.dumps(value)}")
        if not math.isfinite(value):
            raise _Invalid(f"probability of '{label}' must be finite, got {value}")
        if value < 0:
            raise _Invalid(f"probability of '{label}' must not be negative, got {value}")
        values.append(float(value))
    total = math.fsum(values)
    if abs(total - 1.0) > spec.tolerance:
        raise _Invalid(f"probabilities sum to {total:.6g}, outside 1 ± {spec.tolerance:g}")
    return values


def normalize_record(obj: Any, spec: RecordSpec, position: int) -> dict[str, Any]:
    """Validate one parsed record and return its row of the normalized table (without
    `position`'s partition offset applied by the caller). Raises `_Invalid`."""
    if not isinstance(obj, dict):
        raise _Invalid("invalid production record:\n  (root): must be a JSON object")
    problems = _field_problems(obj)
    if problems:
        raise _Invalid("invalid production record:\n" + "\n".join(f"  {p}" for p in problems))
    timestamp = parse_timestamp(obj["timestamp"]) if obj.get("timestamp") is not None else None
    if obj["decision"] != spec.decision:
        raise _Invalid(
            f"decision '{obj['decision']}' does not match contract decision '{spec.decision}'"
        )
    values = check_probabilities(obj["probabilities"], spec)
    selected = str(obj["selected"])
    if selected not in spec.labels:
        labels = list(spec.labels)
        raise _Invalid(f"selected '{selected}' is not one of the contract labels {labels}")
    best = spec.labels[values.index(max(values))]
    if selected != best:
        raise _Invalid(f"selected '{selected}' is not the most probable label '{best}'")
    probability = values[spec.labels.index(selected)]
    confidence = obj.get("confidence")
    if confidence is not None and confidence != probability:
        raise _Invalid(
            f"confidence {confidence} does not equal the probability of '{selected}' "
            f"({probability})"
        )
    outcome = None if obj.get("outcome") is None else str(obj["outcome"])
    if outcome is not None and outcome not in spec.labels:
        raise _Invalid(f"outcome '{outcome}' is not one of the contract labels {list(spec.labels)}")
    correct = obj.get("outcome_correct")
    if outcome is not None:
        derived = selected == outcome
        if correct is not None and correct != derived:
            raise _Invalid(f"outcome_correct {correct} disagrees with selected/outcome")
        correct = derived
    action, fallback = obj.get("action"), obj.get("fallback")
    if action == "fallback" and fallback is False:
        raise _Invalid("action 'fallback' conflicts with fallback=false")
    if fallback is True and action is not None and action != "fallback":
        raise _Invalid(f"fallback=true conflicts with action '{action}'")
    metadata = obj.get("metadata") or {}
    row: dict[str, Any] = {
        "position": position,
        "id": obj.get("id") or f"record-{position}",
        "timestamp": timestamp,
        "input_text": obj["input"] if isinstance(obj.get("input"), str) else None,
        "input_json": compact_json(obj["input"]) if isinstance(obj.get("input"), dict) else None,
        "probabilities": dict(zip(spec.labels, values, strict=True)),
        "selected": selected,
        "confidence": probability,
        "backend": obj.get("backend"),
        "model": obj.get("model"),
        "model_version": obj.get("model_version"),
        "outcome": outcome,
        "outcome_correct": correct,
        "latency_ms": _float_or_none(obj.get("latency_ms")),
        "cost": _float_or_none(obj.get("cost")),
        "action": action,
        "fallback": fallback,
        "metadata_json": compact_json(metadata),
    }
    for key in spec.segments:
        value = metadata.get(key)
        _check_segment_value(key, value)
        row[segment_column(key)] = segment_token(value)
    return row


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


def loads_strict(text: str | bytes) -> Any:
    """`json.loads` that rejects duplicate keys (raises ValueError)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)


# -- partitions ----------------------------------------------------------------------------


def list_partitions(source: str | Path | Sequence[str | Path]) -> list[Path]:
    """Files of a source: one file, a folder (recursively, sorted) or a glob pattern."""
    if not isinstance(source, str | Path):
        return [p for item in source for p in list_partitions(item)]
    path = Path(source)
    if path.is_dir():
        files = sorted(
            (p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES),
            key=lambda p: p.relative_to(path).as_posix(),
        )
        if not files:
            raise DatasetError(f"{source}: no .jsonl, .json or .parquet files in this folder")
        return files
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise DatasetError(
                f"{source}: unsupported record file type '{path.suffix}' "
                "(use .jsonl, .json or .parquet)"
            )
        return [path]
    matches = sorted(Path(m) for m in glob.glob(str(source), recursive=True))
    files = [m for m in matches if m.is_file() and m.suffix in SUFFIXES]
    if not files:
        raise DatasetError(f"{source}: no such file, folder or matching record files")
    return files


def source_hash(files: Sequence[Path], digests: Sequence[str]) -> str:
    """`sha256:` of the file bytes for one file (as DecGuard); for several partitions, of
    the lines `<name>\\t<sha256 of its bytes>` in partition order."""
    if len(files) == 1:
        return f"sha256:{digests[0]}"
    listing = "".join(f"{f.name}\t{d}\n" for f, d in zip(files, digests, strict=True))
    return "sha256:" + hashlib.sha256(listing.encode()).hexdigest()


def _id_hashes(ids: pl.Series) -> np.ndarray:
    # A fixed seed keeps the hashes comparable across partitions within one process.
    return ids.hash(seed=0x5EED).to_numpy()


# -- reading one partition -------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """A validated slice of one partition, in file order."""

    path: Path
    table: pl.DataFrame


class RecordReader:
    """Reads the partitions of a source in order, validating every record, one batch at a
    time (a JSONL or JSON file is one batch; Parquet row groups are grouped into batches)."""

    def __init__(self, source: str | Path | Sequence[str | Path], spec: RecordSpec) -> None:
        self.spec = spec
        self.files = list_partitions(source)
        self.digests: list[str] = []
        self.n_records = 0
        # 64-bit hashes of every id accepted so far (8 bytes per record): ids are unique
        # within a batch by an exact check, across batches by sorting these once.
        self._hashes: list[np.ndarray] = []
        self._watch: set[int] | None = None
        self._hits: list[tuple[str, Path, str]] = []

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

    def _read_files(self) -> Iterator[Batch]:
        for path in self.files:
            digest = hashlib.sha256()
            if path.suffix == ".parquet":
                _hash_file(path, digest)
                for table, first_row in _parquet_batches(path, self.spec):
                    yield self._accept(path, table, lambda i, f=first_row: f"row {f + i}")
            elif path.suffix == ".json":
                data = _read_bytes(path)
                digest.update(data)
                yield self._accept(path, self._json_list(data, path), lambda i: f"record {i + 1}")
            else:
                for data, first_line, n_lines in _jsonl_chunks(path, digest):
                    table, lines = self._jsonl(data, path, first_line, n_lines)
                    yield self._accept(path, table, lambda i, n=lines: f"line {n[i]}")
            self.digests.append(digest.hexdigest())

    def read_all(self) -> pl.DataFrame:
        """Every record of the source in one table (for small inputs and tests)."""
        frames = [batch.table for batch in self.batches()]
        return pl.concat(frames) if frames else pl.DataFrame(schema=self.spec.schema)

    # -- shared finishing: positions, ids, duplicates ------------------------------------

    def _accept(self, path: Path, table: pl.DataFrame, where: Any) -> Batch:
        offset = self.n_records
        table = table.with_columns(
            (pl.int_range(1, table.height + 1, dtype=pl.Int64) + offset).alias("position")
        ).with_columns(
            pl.coalesce(
                pl.col("id"), pl.lit("record-") + pl.col("position").cast(pl.String)
            ).alias("id")
        )
        ids = table["id"]
        repeated = ids.is_duplicated() & ~ids.is_first_distinct()
        if repeated.any():
            index = int(repeated.arg_true()[0])
            first = int((ids == ids[index]).arg_true()[0])
            raise DatasetError(
                f"{path}: {where(index)}: duplicate record id '{ids[index]}' "
                f"(first at {where(first)})"
            )
        hashes = _id_hashes(ids)
        if self._watch is not None:
            for i in np.flatnonzero(np.isin(hashes, list(self._watch))).tolist():
                self._hits.append((ids[i], path, where(i)))
        else:
            self._hashes.append(hashes)
        self.n_records += table.height
        return Batch(path, table.select(list(self.spec.schema)))

    def _raise_duplicates(self) -> None:
        """Raise for the first id that repeats across batches. Only equal hashes are
        candidates; the files are read again to confirm them and name both places."""
        if self._watch is not None or len(self._hashes) < 2:
            return
        ordered = np.sort(np.concatenate(self._hashes))
        candidates = ordered[1:][ordered[1:] == ordered[:-1]]
        if not candidates.size:
            return
        again = RecordReader(self.files, self.spec)
        again._watch = set(candidates.tolist())
        first: dict[str, tuple[Path, str]] = {}
        try:
            for _ in again._read_files():
                for record_id, path, where in again._hits:
                    if record_id in first:
                        seen_path, seen_where = first[record_id]
                        place = seen_where if seen_path == path else f"{seen_where} of {seen_path}"
                        raise DatasetError(
                            f"{path}: {where}: duplicate record id '{record_id}' "
                            f"(first at {place})"
                        )
                    first[record_id] = (path, where)
                again._hits.clear()
        except DatasetError as error:
            if "duplicate record id" in str(error):
                raise
            # a later invalid record: the duplicate check only covers what came before it

    # -- formats ----------------------------------------------------------------------------

    def _json_list(self, data: bytes, path: Path) -> pl.DataFrame:
        try:
            items = loads_strict(_decode(data, path))
        except ValueError as exc:
            raise DatasetError(f"{path}: invalid JSON: {exc}") from None
        if not isinstance(items, list):
            raise DatasetError(f"{path}: a .json record file must hold a list of records")
        return normalize_objects(items, self.spec, str(path), offset=self.n_records)

    def _jsonl(
        self, data: bytes, path: Path, first_line: int, n_lines: int
    ) -> tuple[pl.DataFrame, list[int] | _Consecutive]:
        fast = _fast_jsonl(data, path, self.spec, first_line, n_lines)
        if fast is not None:
            return fast, _Consecutive(first_line)
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
        except _Invalid as exc:
            raise DatasetError(f"{where}: record {i + 1}: {exc}") from None
        if row["id"] in first:
            raise DatasetError(
                f"{where}: record {i + 1}: duplicate record id '{row['id']}' "
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


def _jsonl_chunks(path: Path, digest: Any) -> Iterator[tuple[bytes, int, int]]:
    """Whole lines of a JSONL file in blocks of about `JSONL_CHUNK_BYTES`, with the number
    of each block's first line and its line count; feeds the bytes to `digest` on the way."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror})") from None
    first_line = 1
    with handle:
        while block := handle.read(JSONL_CHUNK_BYTES):
            if not block.endswith(b"\n"):
                block += handle.readline()
            digest.update(block)
            n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            yield block, first_line, n_lines
            first_line += n_lines


def _hash_file(path: Path, digest: Any) -> None:
    try:
        with path.open("rb") as handle:
            while block := handle.read(JSONL_CHUNK_BYTES):
                digest.update(block)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror})") from None


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    _hash_file(path, digest)
    return digest.hexdigest()


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror})") from None


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 (byte {exc.start})") from None


def _strict_jsonl(
    data: bytes, path: Path, spec: RecordSpec, offset: int, first_line: int = 1
) -> tuple[pl.DataFrame, list[int]]:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, line in enumerate(_decode(data, path).split("\n"), start=first_line):
        if not line.strip():
            continue
        try:
            obj = loads_strict(line)
        except ValueError as exc:
            raise DatasetError(f"{path}: line {number}: invalid JSON: {exc}") from None
        try:
            rows.append(normalize_record(obj, spec, offset + len(rows) + 1))
        except _Invalid as exc:
            raise DatasetError(f"{path}: line {number}: {exc}") from None
        lines.append(number)
    table = pl.DataFrame(rows, schema=spec.schema, orient="row") if rows else pl.DataFrame(
        schema=spec.schema
    )
    return table, lines


def explain_line(line: str | bytes, spec: RecordSpec) -> str | None:
    """The strict parser's verdict on one line: the problem, or None if it is valid."""
    try:
        obj = loads_strict(line)
    except ValueError as exc:
        return f"invalid JSON: {exc}"
    try:
        normalize_record(obj, spec, 1)
    except _Invalid as exc:
        return str(exc)
    return None


# -- the vectorized JSONL path ---------------------------------------------------------------


def _arrow_schema(spec: RecordSpec) -> pa.Schema:
    fields = [pa.field(name, pa.string()) for name in _STRING_FIELDS]
    fields += [pa.field(name, pa.float64()) for name in _NUMBER_FIELDS]
    fields += [pa.field(name, pa.bool_()) for name in _BOOL_FIELDS]
    fields.append(
        pa.field("probabilities", pa.struct([pa.field(lb, pa.float64()) for lb in spec.labels]))
    )
    return pa.schema(fields)


def _fast_jsonl(
    data: bytes, path: Path, spec: RecordSpec, first_line: int, n_lines: int
) -> pl.DataFrame | None:
    """Arrow + polars path; None when the file needs the strict parser.

    Arrow skips blank lines and splits a line holding two objects into two rows, so the
    row count equals the line count only when neither happens (then row i is line i + 1);
    anything else goes to the strict parser, which numbers lines itself."""
    options = pa_json.ParseOptions(
        explicit_schema=_arrow_schema(spec), unexpected_field_behavior="infer"
    )
    try:
        arrow = pa_json.read_json(
            io.BytesIO(data),
            read_options=pa_json.ReadOptions(block_size=1 << 20),
            parse_options=options,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if arrow.num_rows != n_lines or not n_lines:
        return None
    raw = pl.from_arrow(arrow)
    assert isinstance(raw, pl.DataFrame)
    try:
        bad, table = _vectorized(raw, spec)
    except _NeedStrict:
        return None
    if bad is not None:
        problem = explain_line(data.split(b"\n", bad + 1)[bad], spec)
        if problem is None:
            return None
        raise DatasetError(f"{path}: line {first_line + bad}: {problem}")
    assert table is not None
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


class _NeedStrict(Exception):
    """The fast path cannot decide this partition (or cannot locate a problem)."""


def _null_or(dtype: pl.DataType, *allowed: type[pl.DataType]) -> bool:
    return dtype == pl.Null or isinstance(dtype, allowed)


def _vectorized(raw: pl.DataFrame, spec: RecordSpec) -> tuple[int | None, pl.DataFrame | None]:
    """(first bad row or None, normalized table when all rows are good). `metadata_json` is
    `{}` and `input_json` null here; the callers fill them from the source text."""
    labels = spec.labels
    checks: list[pl.Expr] = []
    for name in raw.columns:
        if name not in RECORD_FIELDS:
            if raw[name].dtype == pl.Null:
                raise _NeedStrict
            checks.append(pl.col(name).is_not_null())
    for name in RECORD_FIELDS:
        if name not in raw.columns:
            raw = raw.with_columns(pl.lit(None).alias(name))
    probs = raw["probabilities"].dtype
    fields = [f.name for f in probs.fields] if isinstance(probs, pl.Struct) else []
    if probs != pl.Null and not isinstance(probs, pl.Struct):
        checks.append(pl.col("probabilities").is_not_null())
    extra = [name for name in fields if name not in labels]
    p = [
        pl.col("probabilities").struct.field(lb).cast(pl.Float64)
        if lb in fields
        else pl.lit(None, dtype=pl.Float64)
        for lb in labels
    ]
    for name in extra:
        checks.append(pl.col("probabilities").struct.field(name).is_not_null())
    if extra and raw.select(pl.any_horizontal(checks[-len(extra):]).any()).item() is False:
        raise _NeedStrict  # an unknown label whose value is null everywhere
    checks.append(pl.col("probabilities").is_null())
    for col in p:
        checks.append(col.is_null() | col.is_nan() | col.is_infinite() | (col < 0))
    total = pl.sum_horizontal(p)
    # Near the tolerance edge the naive sum may differ from fsum: recheck those exactly.
    near = ((total - 1.0).abs() - spec.tolerance).abs() <= 1e-9
    raw = raw.with_columns(_near=near.fill_null(False))
    off = ((total - 1.0).abs() > spec.tolerance) & ~pl.col("_near")
    checks.append(off)
    if raw["_near"].any():
        checks.append(pl.col("_near") & pl.lit(pl.Series(_exact_sum_off(raw, spec))))

    checks.append(pl.col("decision").is_null() | (pl.col("decision") != spec.decision))
    selected, bad_sel = _label_column(raw, "selected")
    outcome, bad_out = _label_column(raw, "outcome")
    checks += [bad_sel, bad_out, selected.is_null()]
    checks.append(~selected.is_in(list(labels)))
    checks.append(outcome.is_not_null() & ~outcome.is_in(list(labels)))
    best = pl.max_horizontal(p)
    argmax = pl.when(p[0] == best).then(pl.lit(labels[0]))
    for lb, col in zip(labels[1:], p[1:], strict=True):
        argmax = argmax.when(col == best).then(pl.lit(lb))
    checks.append(selected != argmax)
    chosen = pl.when(selected == labels[0]).then(p[0])
    for lb, col in zip(labels[1:], p[1:], strict=True):
        chosen = chosen.when(selected == lb).then(col)
    checks.append(pl.col("confidence").is_not_null() & (pl.col("confidence") != chosen))
    derived = pl.when(outcome.is_not_null()).then(selected == outcome)
    checks.append(
        derived.is_not_null()
        & pl.col("outcome_correct").is_not_null()
        & (derived != pl.col("outcome_correct"))
    )
    for name in ("latency_ms", "cost"):
        col = pl.col(name)
        checks.append(col.is_not_null() & (col.is_nan() | col.is_infinite() | (col < 0)))
    checks.append(pl.col("confidence").is_nan() | pl.col("confidence").is_infinite())
    checks.append(pl.col("action").is_not_null() & ~pl.col("action").is_in(list(ACTIONS)))
    checks.append((pl.col("action") == "fallback") & (pl.col("fallback") == False))  # noqa: E712
    checks.append(
        (pl.col("fallback") == True)  # noqa: E712
        & pl.col("action").is_not_null()
        & (pl.col("action") != "fallback")
    )
    checks.append(pl.col("id") == "")
    input_type = raw["input"].dtype
    if not _null_or(input_type, pl.String, pl.Struct):
        checks.append(pl.col("input").is_not_null())
    meta_type = raw["metadata"].dtype
    if not _null_or(meta_type, pl.Struct):
        checks.append(pl.col("metadata").is_not_null())
    segment_exprs, segment_checks = _segment_tokens(raw, spec)
    checks += segment_checks
    timestamps, bad_time = _timestamps(raw)
    checks.append(bad_time)

    frame = raw.with_columns(
        _bad=pl.any_horizontal([c.fill_null(False) for c in checks]),
        _selected=selected,
        _outcome=outcome,
        _chosen=chosen,
        _derived=derived,
        _timestamp=timestamps,
    )
    bad_rows = frame["_bad"].arg_true()
    if bad_rows.len():
        return int(bad_rows[0]), None
    table = frame.select(
        pl.lit(None, dtype=pl.Int64).alias("position"),
        pl.col("id"),
        pl.col("_timestamp").alias("timestamp"),
        (pl.col("input") if input_type == pl.String else pl.lit(None, dtype=pl.String)).alias(
            "input_text"
        ),
        pl.lit(None, dtype=pl.String).alias("input_json"),
        pl.struct([col.alias(lb) for lb, col in zip(labels, p, strict=True)]).alias(
            "probabilities"
        ),
        pl.col("_selected").alias("selected"),
        pl.col("_chosen").alias("confidence"),
        pl.col("backend"),
        pl.col("model"),
        pl.col("model_version"),
        pl.col("_outcome").alias("outcome"),
        pl.coalesce(pl.col("_derived"), pl.col("outcome_correct")).alias("outcome_correct"),
        pl.col("latency_ms"),
        pl.col("cost"),
        pl.col("action"),
        pl.col("fallback"),
        pl.lit("{}").alias("metadata_json"),
        *segment_exprs,
    )
    return None, table.cast(spec.schema)  # type: ignore[arg-type]


def _exact_sum_off(raw: pl.DataFrame, spec: RecordSpec) -> np.ndarray:
    """Rows near the tolerance edge whose exact (fsum) total is outside it."""
    off = np.zeros(raw.height, dtype=bool)
    near = raw.with_row_index("_row").filter(pl.col("_near"))
    for row, value in near.select("_row", "probabilities").iter_rows():
        if value is None or any(value.get(lb) is None for lb in spec.labels):
            continue
        total = math.fsum(value[lb] for lb in spec.labels)
        off[row] = abs(total - 1.0) > spec.tolerance
    return off


def _label_column(raw: pl.DataFrame, name: str) -> tuple[pl.Expr, pl.Expr]:
    """(the field as a label string, rows whose JSON type is not allowed). Integers become
    strings; any other type is rejected."""
    dtype = raw[name].dtype
    if dtype == pl.String or dtype == pl.Null:
        return pl.col(name).cast(pl.String), pl.lit(False)
    if dtype == pl.Int64:
        return pl.col(name).cast(pl.String), pl.lit(False)
    return pl.lit(None, dtype=pl.String), pl.col(name).is_not_null()


_CLOCK = r"\d{4}-\d{2}-\d{2}T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
_UTC_SECONDS = f"^{_CLOCK}Z$"
_WITH_OFFSET = rf"^{_CLOCK}(?:\.\d{{3}}|\.\d{{6}})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$"


def _timestamps(raw: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """Parsed UTC timestamps and rows whose timestamp is invalid or has no timezone.

    `datetime.fromisoformat` is the reference for what ISO 8601 means here. polars parses
    the common shapes much faster, but leniently (it takes `2026-1-5` or second 60), so it
    only sees strings a strict pattern has vetted; everything else is parsed once per
    distinct string by Python."""
    dtype = raw["timestamp"].dtype
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
        converted = pl.col("timestamp").dt.convert_time_zone("UTC").dt.cast_time_unit("us")
        return converted, pl.lit(False)
    if dtype == pl.Null:
        return pl.lit(None, dtype=pl.Datetime("us", "UTC")), pl.lit(False)
    target = pl.Datetime("us", "UTC")
    text = raw["timestamp"]
    utc = text.str.contains(_UTC_SECONDS)
    parsed = text.str.strptime(target, format="%Y-%m-%dT%H:%M:%SZ", strict=False)
    parsed = pl.select(pl.when(utc).then(parsed)).to_series()
    rest = text.is_not_null() & parsed.is_null()
    if rest.any():
        offset = rest & text.str.contains(_WITH_OFFSET)
        general = text.str.replace(r"Z$", "+00:00").str.to_datetime(
            format="%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us", time_zone="UTC"
        )
        parsed = pl.select(pl.when(offset).then(general).otherwise(parsed)).to_series()
        rest = text.is_not_null() & parsed.is_null()
    if rest.any():
        good: dict[str, datetime] = {}
        for value in text.filter(rest).unique().to_list():
            try:
                good[value] = parse_timestamp(value)
            except _Invalid:
                continue
        slow = text.replace_strict(
            pl.Series(list(good), dtype=pl.String),
            pl.Series(list(good.values()), dtype=target),
            default=None,
            return_dtype=target,
        )
        parsed = pl.select(pl.coalesce(parsed, slow)).to_series()
    return pl.lit(parsed), pl.lit(text.is_not_null() & parsed.is_null())


def _segment_tokens(raw: pl.DataFrame, spec: RecordSpec) -> tuple[list[pl.Expr], list[pl.Expr]]:
    exprs: list[pl.Expr] = []
    checks: list[pl.Expr] = []
    meta_type = raw["metadata"].dtype
    names = {f.name: f.dtype for f in meta_type.fields} if isinstance(meta_type, pl.Struct) else {}
    for key in spec.segments:
        target = segment_column(key)
        if key not in names or names[key] == pl.Null:
            exprs.append(pl.lit(MISSING_TOKEN).alias(target))
            continue
        dtype = names[key]
        value = pl.col("metadata").struct.field(key)
        if dtype == pl.String:
            token = _tokens_by_value(raw, value, str)
        elif dtype == pl.Boolean:
            token = pl.when(value).then(pl.lit("bool:True")).otherwise(pl.lit("bool:False"))
        elif dtype == pl.Int64:
            token = pl.lit("int:") + value.cast(pl.String)
        elif dtype == pl.Float64:
            checks.append(value.is_nan() | value.is_infinite())
            integral = raw.select((value.round(0) == value).any()).item()
            if integral:
                raise _NeedStrict  # Arrow widened ints to floats: the type is lost
            token = _tokens_by_value(raw, value, float)
        else:
            checks.append(value.is_not_null())
            token = pl.lit(None, dtype=pl.String)
        exprs.append(pl.coalesce(token, pl.lit(MISSING_TOKEN)).alias(target))
    return exprs, checks


def _tokens_by_value(raw: pl.DataFrame, value: pl.Expr, kind: type) -> pl.Expr:
    # Few distinct values per segment key: compute the token in Python once per value.
    distinct = [v for v in raw.select(value.unique()).to_series().to_list() if v is not None]
    if isinstance(raw.select(value).to_series().dtype, pl.Float64):
        distinct = [v for v in distinct if math.isfinite(v)]
    tokens = [segment_token(kind(v)) for v in distinct]
    return value.replace_strict(
        pl.Series(distinct), pl.Series(tokens, dtype=pl.String), default=None,
        return_dtype=pl.String,
    )


# -- Parquet ---------------------------------------------------------------------------------


def _parquet_batches(path: Path, spec: RecordSpec) -> Iterator[tuple[pl.DataFrame, int]]:
    """Validated tables of one Parquet file with the 1-based row number of their first row."""
    try:
        handle = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    names = handle.schema_arrow.names
    unknown = [n for n in names if n not in _PARQUET_COLUMNS]
    if unknown:
        raise DatasetError(
            f"{path}: unknown column(s) {unknown} (record columns are {list(_PARQUET_COLUMNS)})"
        )
    first_row = 1
    for batch in handle.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        raw = pl.from_arrow(batch)
        assert isinstance(raw, pl.DataFrame)
        yield _parquet_table(raw, path, spec, first_row), first_row
        first_row += raw.height


_PARQUET_COLUMNS = (
    *(n for n in RECORD_FIELDS if n != "metadata"),
    "input_json",
    "metadata_json",
)


def _parquet_table(raw: pl.DataFrame, path: Path, spec: RecordSpec, first_row: int) -> pl.DataFrame:
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
                f"{path}: row {first_row + int(nonnull[0])}: {_NO_TIMEZONE} "
                "(the Parquet column is a naive timestamp)"
            )
    raw = raw.with_columns(
        [pl.col(n).cast(pl.Float64) for n in _NUMBER_FIELDS if raw[n].dtype != pl.Null]
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
        bad, table = _vectorized(shaped, spec)
    except (_NeedStrict, _MixedTypes):
        return _parquet_strict(lines, path, spec, first_row)
    if bad is not None:
        problem = explain_line(lines[bad], spec) or "record does not validate"
        raise DatasetError(f"{path}: row {first_row + bad}: {problem}")
    assert table is not None
    return table.with_columns(metadata_json=meta_text.fill_null("{}"), input_json=input_text)


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
    expected.update({name: (pl.String,) for name in _STRING_FIELDS if name != "timestamp"})
    expected.update({name: numbers for name in _NUMBER_FIELDS})
    expected.update({name: (pl.Boolean,) for name in _BOOL_FIELDS})
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


def _parse_json_column(text: pl.Series, path: Path, first_row: int, name: str) -> pl.Series:
    """A column of JSON objects as text → a struct column, parsed strictly by Arrow. Raises
    `DatasetError` for a row that is not a JSON object, `_MixedTypes` when Arrow cannot
    type the column."""
    if text.is_null().all():
        return pl.repeat(None, text.len(), dtype=pl.Null, eager=True)
    joined = text.fill_null("{}").str.replace_all("\n", " ", literal=True).str.join("\n")
    options = pa_json.ParseOptions(unexpected_field_behavior="infer")
    try:
        arrow = pa_json.read_json(io.BytesIO(joined.item().encode()), parse_options=options)
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

    def __len__(self) -> int:
        return self.raw.height

    def __getitem__(self, index: int) -> str:
        row = self.raw.row(index, named=True)
        record = {k: v for k, v in row.items() if k in RECORD_FIELDS and v is not None}
        if isinstance(record.get("timestamp"), datetime):
            record["timestamp"] = record["timestamp"].isoformat()
        for column, field in (("metadata_json", "metadata"), ("input_json", "input")):
            if row.get(column) is not None:
                record[field] = loads_strict(row[column])
        return json.dumps(record, ensure_ascii=False)


def _parquet_strict(lines: _RowLines, path: Path, spec: RecordSpec, first_row: int) -> pl.DataFrame:
    rows = []
    for i in range(len(lines)):
        try:
            rows.append(normalize_record(loads_strict(lines[i]), spec, i + 1))
        except _Invalid as exc:
            raise DatasetError(f"{path}: row {first_row + i}: {exc}") from None
    return pl.DataFrame(rows, schema=spec.schema, orient="row")
