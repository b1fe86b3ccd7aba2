"""Units of a partitioned production check: which bytes each task reads.

A record source is planned once: every file is hashed (sha256 of every byte: the identity
of the input, never its size, mtime or footer) and its records counted (Parquet from the
footer, JSONL by its non-blank lines, a JSON list by parsing it), so every record's 1-based
position — and with it the default id `record-<n>` — is known before any unit is read.
Units are the files (the partitions of the log), row-group ranges of about `UNIT_ROWS`
rows of a large Parquet file and equal line-aligned byte ranges of about `UNIT_BYTES` of a
large JSONL file; they depend only on the input, never on the number of workers. A
`SourcePlan` is the planned source: its files, their digests and its units.
"""

from __future__ import annotations

import glob
import hashlib
import io
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from decflow import interrupts
from decflow.data.bounds import MAX_JSON_FILE_VALUES, long_line
from decflow.data.records.blocks import Block, BlockReader, LongLine, line_stats
from decflow.errors import DatasetError
from decflow.store.remote import filesystem, is_url, open_input
from decflow.strictjson import values_over

SUFFIXES = (".jsonl", ".json", ".parquet")
UNIT_ROWS = 5_000_000
UNIT_BYTES = 64 << 20
# What counts as a blank line of a JSONL file (skipped): ASCII whitespace only.
WHITESPACE = b" \t\r\n\x0b\x0c"
_BLANK_LINE = re.compile(rb"^[ \t\r\x0b\x0c]*$", re.MULTILINE)
_READ_BYTES = 16 << 20


@dataclass(frozen=True)
class Partition:
    """A file of a source as listed, never read: its path (a local path or an `s3://…`
    URL), its name within the source (the path below the folder or glob root, for a
    single file its own name), its size and `version` (the modification time in ns of a
    local file, the ETag of an object, else its modification time): what a monitor
    compares to tell a partition it checked from a new or rewritten one."""

    path: str
    name: str
    size: int
    version: str


def list_partitions(source: str | Path | Sequence[str | Path]) -> list[Path | str]:
    """Files of a source: one file, a folder (recursively, sorted) or a glob pattern; local
    paths, or `s3://…` URLs (as strings) read through `store.remote`."""
    if not isinstance(source, str | Path):
        return [p for item in source for p in list_partitions(item)]
    return [location(p.path) for p in partition_files(source)]


def partition_files(source: str | Path, *, empty_folder: bool = False) -> list[Partition]:
    """`list_partitions` with each file's name, size and version (one listing: no file is
    opened). `empty_folder`: a local folder without record files lists none (a monitored
    source before its first partition) instead of being an error."""
    if isinstance(source, str) and is_url(source):
        return _remote_partitions(source)
    path = Path(source)
    if path.is_dir():
        files = sorted(
            (p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES),
            key=lambda p: p.relative_to(path).as_posix(),
        )
        if not files and not empty_folder:
            raise DatasetError(f"{source}: no .jsonl, .json or .parquet files in this folder")
        return [_local(p, p.relative_to(path).as_posix()) for p in files]
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise DatasetError(
                f"{source}: unsupported record file type '{path.suffix}' "
                "(use .jsonl, .json or .parquet)"
            )
        return [_local(path, path.name)]
    matches = sorted(Path(m) for m in glob.glob(str(source), recursive=True))
    files = [m for m in matches if m.is_file() and m.suffix in SUFFIXES]
    if not files:
        raise DatasetError(f"{source}: no such file, folder or matching record files")
    root = _glob_root(str(source))
    return [_local(p, _below(str(p), root)) for p in files]


def _local(path: Path, name: str) -> Partition:
    try:
        stat = path.stat()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return Partition(str(path), name, stat.st_size, str(stat.st_mtime_ns))


def _glob_root(pattern: str) -> str:
    """The folder a glob pattern's matches are named below: its path up to the first part
    with a wildcard."""
    parts = PurePosixPath(pattern).parts
    fixed = list(itertools.takewhile(lambda part: not glob.has_magic(part), parts))
    return str(PurePosixPath(*fixed)) if fixed else ""


def _below(path: str, root: str) -> str:
    return path[len(root):].lstrip("/") if root and path.startswith(root) else path


def _remote_partitions(url: str) -> list[Partition]:
    fs, inner = filesystem(url)
    try:
        if fs.isdir(inner):
            found = fs.find(inner, detail=True)
            root = inner.rstrip("/")
        elif fs.isfile(inner):
            if suffix(inner) not in SUFFIXES:
                raise DatasetError(f"{url}: unsupported record file type '{suffix(inner)}' "
                                   "(use .jsonl, .json or .parquet)")
            found = {inner: fs.info(inner)}
            root = str(PurePosixPath(inner).parent)
        else:
            found = fs.glob(inner, detail=True)
            root = _glob_root(inner)
    except OSError as exc:
        raise DatasetError(f"{url}: cannot list ({exc})") from None
    files = sorted((p, info) for p, info in found.items() if suffix(p) in SUFFIXES
                   and info.get("type", "file") == "file")
    if not files:
        raise DatasetError(f"{url}: no such file, folder or matching record files")
    return [Partition(fs.unstrip_protocol(p), _below(p, root), int(info.get("size") or 0),
                      _object_version(info)) for p, info in files]


def _object_version(info: dict[str, Any]) -> str:
    """An object's ETag (S3 and most object stores), else its modification time."""
    for key in ("ETag", "etag", "LastModified", "mtime", "last_modified"):
        if info.get(key) is not None:
            return str(info[key]).strip('"')
    return ""


@dataclass(frozen=True)
class FilePart:
    """One file, the Parquet row groups `[start, stop)` of it (`n_rows` rows from row
    `first_row`, 1-based), or the lines of a JSONL file in `byte_range` (from line
    `first_row`)."""

    path: str
    row_groups: tuple[int, int] | None = None
    first_row: int = 1  # or the first line of a JSONL byte range
    n_rows: int = 0
    byte_range: tuple[int, int] | None = None  # JSONL: bytes [start, stop) of whole lines

    @property
    def rows(self) -> tuple[int, int] | None:
        """(first row, number of rows) of a row-group range; None for the whole file."""
        return None if self.row_groups is None else (self.first_row, self.n_rows)


@dataclass(frozen=True)
class Unit:
    """Records `offset + 1 … offset + n_records` of the source, read from `parts`."""

    index: int
    offset: int
    n_records: int
    parts: tuple[FilePart, ...]
    digests: tuple[str, ...]  # sha256 of each part's whole file
    # JSONL: the blocks its one part spans, as (start byte, end byte, first line, records)
    blocks: tuple[tuple[int, int, int, int], ...] = ()

    def pieces(self) -> list[Unit]:
        """The unit as separate reads: one per JSONL block (read side by side, the blocks of
        all units keep every core busy whatever the units' sizes), else the unit itself.
        Their results combine into the unit's (`pipeline.production.units`)."""
        if len(self.blocks) < 2:
            return [self]
        pieces, offset = [], self.offset
        for start, stop, line, records in self.blocks:
            part = FilePart(self.parts[0].path, None, line, records, (start, stop))
            pieces.append(Unit(self.index, offset, records, (part,), self.digests))
            offset += records
        return pieces

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "offset": self.offset,
            "n_records": self.n_records,
            "parts": [
                {"path": p.path, "row_groups": None if p.row_groups is None
                 else list(p.row_groups), "first_row": p.first_row, "n_rows": p.n_rows,
                 "byte_range": None if p.byte_range is None else list(p.byte_range)}
                for p in self.parts
            ],
            "digests": list(self.digests),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Unit:
        parts = tuple(
            FilePart(p["path"], None if p["row_groups"] is None else tuple(p["row_groups"]),
                     p["first_row"], p["n_rows"],
                     None if p["byte_range"] is None else tuple(p["byte_range"]))
            for p in data["parts"]
        )
        return cls(data["index"], data["offset"], data["n_records"], parts,
                   tuple(data["digests"]))

    def identity(self) -> list[Any]:
        """What the unit's output depends on in the input: its files' bytes and ranges
        (never their paths, so a moved file is still a cache hit)."""
        return [[d, p.row_groups, p.byte_range]
                for d, p in zip(self.digests, self.parts, strict=True)]


@dataclass(frozen=True)
class ScannedFile:
    path: str
    digest: str
    n_records: int
    row_group_rows: tuple[int, ...] | None  # Parquet only
    size: int
    # JSONL only: (first byte, first line, records) of each block of whole lines
    blocks: tuple[tuple[int, int, int], ...] = ()


# a source's files and the scan of each
Scanned = tuple[list[str], list[ScannedFile]]


def suffix(path: str | Path) -> str:
    return PurePosixPath(str(path)).suffix


def open_records(path: Path | str) -> io.BufferedIOBase:
    """A record file opened for reading, local or remote; exit 2 when it cannot be."""
    try:
        if isinstance(path, str) and is_url(path):
            return open_input(path)
        return Path(path).open("rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None


def location(path: str) -> Path | str:
    """How a listed file is handled: a `Path` when local, the URL string when remote."""
    return path if is_url(path) else Path(path)


def scan_file(path: str) -> ScannedFile:
    """sha256 of every byte, the number of records and (Parquet) the rows per row group. A
    JSONL block whose lines all open with `{` has a record on every line; only other blocks
    are searched for blank lines."""
    kind = suffix(path)
    digest = hashlib.sha256()
    size = 0
    n_records, line = 0, 1
    blocks: list[tuple[int, int, int]] = []
    json_text = b""
    with open_records(location(path)) as handle, BlockReader(handle) as reader:
        block_bytes = _equal_blocks(handle)
        while block := _next_block(reader, block_bytes, kind, path, line):
            digest.update(block)
            if kind == ".jsonl":
                stats = line_stats(block)
                lines = stats.lines
                records = lines if stats.plain else _jsonl_records(block)
                blocks.append((size, line, records))
                n_records += records
                line += lines
            elif kind == ".json":
                json_text += block
            size += len(block)
    if kind == ".jsonl":
        return ScannedFile(path, digest.hexdigest(), n_records, None, size, tuple(blocks))
    if kind == ".json":
        return ScannedFile(path, digest.hexdigest(), _json_records(json_text), None, size)
    rows = row_group_rows(path)
    return ScannedFile(path, digest.hexdigest(), sum(rows), rows, size)


def _next_block(reader: BlockReader, size: int, kind: str, path: str, line: int) -> bytearray:
    try:
        return reader.read(size, whole_lines=kind == ".jsonl")
    except LongLine as exc:
        raise DatasetError(long_line(path, line + exc.before)) from None


def _equal_blocks(handle: io.BufferedIOBase) -> int:
    """Block size for a file: at most `_READ_BYTES`, the blocks as equal as the size allows
    (123 MB: eight of 15.4 MB, not seven of 16 and one of 11), so that the pieces read side
    by side (`Unit.pieces`) end together."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    return -(-size // max(1, -(-size // _READ_BYTES))) or _READ_BYTES


T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start `fn(*args)` in a thread now; the returned function waits for its result (and
    raises what it raised). A daemon thread: an error elsewhere never waits for it."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller, which raises it
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="decflow-scan", daemon=True)
    thread.start()

    def wait() -> T:
        interrupts.join(thread)
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    return wait


def _jsonl_records(block: Block) -> int:
    lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    blank = len(_BLANK_LINE.findall(block))
    # the empty "line" after a final newline matches the pattern but is no line
    return lines - blank + (1 if block.endswith(b"\n") else 0)


def _json_records(data: bytes) -> int:
    # A file that does not parse (or would take too much memory parsed) counts 0: reading
    # its unit reports the error.
    if values_over(data, MAX_JSON_FILE_VALUES):
        return 0
    try:
        items = json.loads(data)
    except (ValueError, RecursionError):
        return 0
    return len(items) if isinstance(items, list) else 0


def parquet_footer(file: str) -> Any:
    """The file's Parquet metadata (pyarrow's `FileMetaData`), read from its footer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with open_records(location(file)) as handle:
            return pq.ParquetFile(handle).metadata
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{file}: not a readable Parquet file ({exc})") from None


def row_group_rows(file: str) -> tuple[int, ...]:
    """Rows per row group, from the footer."""
    metadata = parquet_footer(file)
    return tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))


def scan_files(files: Sequence[str], threads: int) -> list[ScannedFile]:
    """`scan_file` of every file, `threads` at a time (hashing releases the GIL)."""
    if threads <= 1 or len(files) <= 1:
        return [scan_file(f) for f in files]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [interrupts.result(f) for f in [pool.submit(scan_file, f) for f in files]]


def scan_source(
    source: str | Path | Sequence[str | Path], *, absolute: bool = False,
    threads: int | None = None,
) -> Scanned:
    """The files of a source (`absolute`: local ones by absolute path, for workers that run
    elsewhere) and `scan_file` of each, `threads` at a time (default: one per core)."""
    files = [
        os.path.abspath(f) if absolute and isinstance(f, Path) else str(f)
        for f in list_partitions(source)
    ]
    return files, scan_files(files, threads or os.cpu_count() or 1)


def scan_in_background(
    source: str | Path | Sequence[str | Path],
) -> Callable[[], Scanned]:
    """Start `scan_source` in a thread now and return the function that waits for it.
    Hashing and reading release the GIL, so a check that starts the scan before importing
    what it needs (polars, the contract models) hashes its input while it imports."""
    return in_thread(lambda: scan_source(source))


def plan_units(scanned: Sequence[ScannedFile]) -> list[Unit]:
    """One unit per file (a partition of the log), except that a Parquet file of more than
    `UNIT_ROWS` rows is split at row-group boundaries into units of about that many, and a
    JSONL file of more than `UNIT_BYTES` at line boundaries into equal units of about that
    size or less."""
    units: list[Unit] = []
    offset = 0

    def add(part: FilePart, digest: str, n: int,
            blocks: tuple[tuple[int, int, int, int], ...] = ()) -> None:
        nonlocal offset
        units.append(Unit(len(units), offset, n, (part,), (digest,), blocks))
        offset += n

    for file in scanned:
        if file.blocks and file.size > UNIT_BYTES:
            _split_jsonl(file, add)
            continue
        rows = file.row_group_rows
        if rows is None or file.n_records <= UNIT_ROWS:
            add(FilePart(file.path), file.digest, file.n_records, _spans(file))
            continue
        start, first_row, taken = 0, 1, 0
        for i, n in enumerate(rows):
            if taken and taken + n > UNIT_ROWS:
                add(FilePart(file.path, (start, i), first_row, taken), file.digest, taken)
                start, first_row, taken = i, first_row + taken, 0
            taken += n
        add(FilePart(file.path, (start, len(rows)), first_row, taken), file.digest, taken)
    return units


def _spans(file: ScannedFile) -> tuple[tuple[int, int, int, int], ...]:
    """A JSONL file's blocks as (start byte, end byte, first line, records)."""
    if not file.blocks:
        return ()
    ends = [start for start, _, _ in file.blocks[1:]] + [file.size]
    return tuple((start, end, line, records)
                 for (start, line, records), end in zip(file.blocks, ends, strict=True))


def _split_jsonl(file: ScannedFile, add: Any) -> None:
    """The fewest units of about `UNIT_BYTES` or less, as equal as whole blocks allow (two
    units of 62 MB, not 64 + 59 … or 48 + 48 + 27)."""
    n_units = -(-file.size // UNIT_BYTES)
    groups: list[list[tuple[int, int, int, int]]] = [[]]
    for block in _spans(file):
        if groups[-1] and (block[0] + block[1]) * n_units // (2 * file.size) >= len(groups):
            groups.append([])
        groups[-1].append(block)
    for blocks in groups:
        taken = sum(records for *_, records in blocks)
        part = FilePart(file.path, None, blocks[0][2], taken, (blocks[0][0], blocks[-1][1]))
        add(part, file.digest, taken, tuple(blocks))


def source_hash(files: Sequence[Path | str], digests: Sequence[str]) -> str:
    """`sha256:` of the file bytes for one file (as DecGuard); for several partitions, of
    the lines `<name>\t<sha256 of its bytes>` in partition order."""
    if len(files) == 1:
        return f"sha256:{digests[0]}"
    listing = "".join(
        f"{PurePosixPath(str(f)).name}\t{d}\n" for f, d in zip(files, digests, strict=True)
    )
    return "sha256:" + hashlib.sha256(listing.encode()).hexdigest()


@dataclass(frozen=True)
class SourcePlan:
    """A record source, hashed, counted and split into units."""

    path: str  # as the report shows it
    files: list[str]
    digests: list[str]
    units: list[Unit]

    @property
    def hash(self) -> str:
        return source_hash(self.files, self.digests)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "digests": self.digests,
                "units": [u.to_dict() for u in self.units]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourcePlan:
        return cls(data["path"], list(data["files"]), list(data["digests"]),
                   [Unit.from_dict(u) for u in data["units"]])


def plan_source(source: str | Path | Sequence[str | Path], shown_path: str | None = None,
                threads: int | None = None, *, absolute: bool = False) -> SourcePlan:
    """List, hash and count the files of a source and split them into units (`absolute`:
    local files by absolute path, for workers that run elsewhere)."""
    files, scanned = scan_source(source, absolute=absolute, threads=threads)
    return plan_scanned(shown_path or str(source), files, scanned)


def plan_scanned(shown_path: str, files: list[str], scanned: list[ScannedFile]) -> SourcePlan:
    """The plan of files already scanned (`scan_source`)."""
    return SourcePlan(shown_path, files, [s.digest for s in scanned], plan_units(scanned))
