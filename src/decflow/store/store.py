"""Content-addressed Parquet store: a local folder, or any fsspec URL.

Layout: `stages/<stage>/<key>/part-NNNNN.parquet … _manifest.json` and `runs/<run_id>/…`.
A stage is complete exactly when its `_manifest.json` exists: parts are written first and
the manifest last, and every file is written under a temporary name and then renamed, so a
process killed at any point leaves nothing that later reads as a valid artifact.
The call stage writes `chunk-*.parquet` files as results arrive; `--resume` reads them back.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import os
import stat
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from decflow.errors import DecflowError
from decflow.store.remote import fsspec_options

if TYPE_CHECKING:
    import polars as pl

MANIFEST = "_manifest.json"
DEFAULT_STORE = ".decflow"
STORE_ENV = "DECFLOW_STORE"
TEMPORARY = ".tmp-"
VERIFY_HINT = "`decflow runs verify` lists every damaged run"
log = logging.getLogger("decflow")

# What to do about an operating-system error on the store, by errno.
_REMEDIES = {
    errno.ENOSPC: "free space on that device (or pass another --store), then run again "
                  "(`--resume RUN` finishes a stopped run)",
    errno.EDQUOT: "the disk quota is used up: free space or pass another --store",
    errno.EFBIG: "the file-size limit (`ulimit -f`) is too small for the store's files: "
                 "raise it, then run again",
    errno.EACCES: "make it readable and writable for this user, or pass another --store",
    errno.EPERM: "make it readable and writable for this user, or pass another --store",
    errno.EROFS: "the file system is read-only: pass a writable --store",
    errno.ENOTDIR: "a part of the store path is a file, not a folder: pass --store a folder",
    errno.EEXIST: "a part of the store path is a file, not a folder: pass --store a folder",
    errno.EISDIR: "a folder stands where the store keeps a file: remove it",
}


class DamagedArtifact(DecflowError):
    """A stored file that is missing, unreadable, or not what its manifest recorded."""

    def __init__(self, uri: str, problem: str, remedy: str = VERIFY_HINT) -> None:
        self.uri, self.problem = uri, problem
        super().__init__(f"store: {uri} {problem}; {remedy}")


class StoreUnusable(DecflowError):
    """The store cannot be read or written (full disk, permissions, a file-size limit)."""


def store_os_error(exc: OSError, doing: str, where: str) -> StoreUnusable:
    """`store: cannot <doing> <where> (<reason>); <what to do>` for an OS error."""
    reason = exc.strerror or type(exc).__name__
    remedy = _REMEDIES.get(exc.errno or 0, "check the store's folder and pass another "
                           "--store if it cannot be fixed")
    return StoreUnusable(f"store: cannot {doing} {where} ({reason}); {remedy}")


@dataclass(frozen=True)
class Part:
    """One file of a stored stage output."""

    path: str  # relative to the store root
    sha256: str
    rows: int


@dataclass(frozen=True)
class Manifest:
    """A stored stage output: where it is, its hash, rows, schema and parts."""

    stage: str
    key: str
    uri: str
    sha256: str
    rows: int
    schema: dict[str, str]
    parts: tuple[Part, ...] = field(default_factory=tuple)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # Built by hand: `dataclasses.asdict` deep-copies `extra`, which can hold a value per
        # case (paraphrase provenance), and run.json embeds every manifest on each update.
        return {
            "stage": self.stage,
            "key": self.key,
            "uri": self.uri,
            "sha256": self.sha256,
            "rows": self.rows,
            "schema": dict(self.schema),
            "parts": [{"path": p.path, "sha256": p.sha256, "rows": p.rows} for p in self.parts],
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            stage=data["stage"],
            key=data["key"],
            uri=data["uri"],
            sha256=data["sha256"],
            rows=int(data["rows"]),
            schema=dict(data["schema"]),
            parts=tuple(Part(**p) for p in data.get("parts", [])),
            extra=dict(data.get("extra", {})),
        )


def stage_key(stage: str, version: str, contract_hash: str, upstream: Sequence[str],
              params: dict[str, Any]) -> str:
    """sha256 of everything a stage's output depends on (never absolute paths)."""
    payload = json.dumps(
        {
            "stage": stage,
            "version": version,
            "contract": contract_hash,
            "upstream": list(upstream),
            "params": params,
        },
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _frame_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    # zstd level 1: as small as the default level 3 on the stages' parts (3.25 MB of a
    # check's exact values: 3,248 KB vs 3,243 KB) in 60 % of the time (7.5 vs 12 ms)
    frame.write_parquet(buffer, compression="zstd", compression_level=1, statistics=False)
    return buffer.getvalue()


class _LocalFiles:
    """The file operations of a local store, by the standard library: fsspec (and the
    asyncio it loads, 35 ms) is imported only for remote stores."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def open(self, path: str, mode: str) -> IO[Any]:
        return open(path, mode)  # the caller closes it

    def cat_file(self, path: str) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def ls(self, path: str, detail: bool = False) -> list[str]:
        return [f"{path}/{name}" for name in os.listdir(path)]


def _local_path(url: str) -> str | None:
    """The path of a local store URL (a path, `file://…` or `local://…`), else None."""
    if "://" not in url:
        return url
    scheme, _, path = url.partition("://")
    return path if scheme in ("file", "local") else None


class Store:
    def __init__(self, url: str | os.PathLike[str]) -> None:
        url = os.fspath(url)
        self.url = url
        local = _local_path(url)
        self.is_local = local is not None
        if local is not None:
            self.fs: Any = _LocalFiles()
            root = os.path.abspath(os.path.expanduser(local))
            _check_local_root(root)
        else:
            import fsspec

            try:
                self.fs, root = fsspec.core.url_to_fs(url, **fsspec_options(url))
            except (ImportError, ValueError) as exc:
                raise DecflowError(f"store '{url}': {exc}") from None
        self.root = root.rstrip("/") if root not in ("/", "") else root

    # -- paths ---------------------------------------------------------------------------
    @property
    def location(self) -> str:
        """Where the store is, independent of the current directory (reports record this)."""
        return self.root if self.is_local else self.fs.unstrip_protocol(self.root)

    def path(self, relative: str) -> str:
        """Where `relative` is. Every file operation of the store goes through here, so a
        path read from a run record or manifest (`../../elsewhere`, `/etc`) can never reach
        outside the store: it is refused as damaged."""
        if relative.startswith("/") or "\x00" in relative or ".." in relative.split("/"):
            raise DamagedArtifact(f"{self.location}/{relative}", "is not a place inside the "
                                  "store (a run record or manifest that names it was edited); "
                                  "nothing was read, written or removed there")
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        return self.path(relative) if self.is_local else self.fs.unstrip_protocol(
            self.path(relative)
        )

    def stage_prefix(self, stage: str, key: str) -> str:
        return f"stages/{stage}/{key}"

    # -- raw files -----------------------------------------------------------------------
    def write_bytes(self, relative: str, data: bytes | Sequence[Piece]) -> None:
        """Write atomically (`data`: the bytes, or pieces of them written one after the
        other): a temporary name in the same folder, then a rename. A failed write (full
        disk, file-size limit, permissions) removes its temporary file and is exit 2 naming
        the file and what to do; the final name is never half written."""
        target = self.path(relative)
        folder = target.rsplit("/", 1)[0]
        temporary = f"{folder}/{TEMPORARY}{uuid.uuid4().hex}"
        try:
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(temporary, "wb") as handle:
                for piece in (data,) if isinstance(data, bytes) else data:
                    handle.write(piece)
            if self.is_local:
                os.replace(temporary, target)
            else:
                self.fs.mv(temporary, target)
        except OSError as exc:
            self._remove_quietly(temporary)
            raise store_os_error(exc, "write", self.uri(relative)) from None
        except BaseException:  # interrupted mid-write: no temporary file left behind
            self._remove_quietly(temporary)
            raise

    def discard(self, relative: str) -> None:
        """Remove a file if it is there; a failure to remove it is not an error."""
        self._remove_quietly(self.path(relative))

    def _remove_quietly(self, path: str) -> None:
        with contextlib.suppress(OSError):
            if self.is_local:
                os.remove(path)
            elif self.fs.exists(path):
                self.fs.rm(path)

    def read_bytes(self, relative: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self.path(relative))
        except FileNotFoundError:
            raise DamagedArtifact(self.uri(relative), "does not exist") from None
        except OSError as exc:
            raise store_os_error(exc, "read", self.uri(relative)) from None
        return data

    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self.path(relative)))

    def size(self, relative: str) -> int:
        """The size of a stored file in bytes (0 when it is gone)."""
        try:
            if self.is_local:
                return os.path.getsize(self.path(relative))
            return int(self.fs.size(self.path(relative)))
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise store_os_error(exc, "read the size of", self.uri(relative)) from None

    def write_json(self, relative: str, data: Any) -> None:
        self.write_bytes(relative, json_bytes(data))

    def read_json(self, relative: str) -> Any:
        """A JSON file of the store; a damaged one (truncated, not JSON) is
        `DamagedArtifact` naming it."""
        data = self.read_bytes(relative)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise DamagedArtifact(self.uri(relative), f"is damaged: not valid JSON ({exc}; "
                                  f"{len(data)} bytes)") from None

    def list_dir(self, relative: str) -> list[str]:
        """Names directly under `relative` (empty when it does not exist); temporary files
        of writes in progress are not listed."""
        folder = self.path(relative)
        try:
            if not self.fs.exists(folder):
                return []
            found = self.fs.ls(folder, detail=False)
        except NotADirectoryError:
            raise DamagedArtifact(self.uri(relative), "is a file, not a folder",
                                  "remove it or pass another --store") from None
        except OSError as exc:
            raise store_os_error(exc, "list", self.uri(relative)) from None
        names = (p.rstrip("/").rsplit("/", 1)[-1] for p in found)
        return sorted(name for name in names if not name.startswith(TEMPORARY))

    # -- stages --------------------------------------------------------------------------
    def manifest(self, stage: str, key: str) -> Manifest | None:
        relative = f"{self.stage_prefix(stage, key)}/{MANIFEST}"
        if not self.exists(relative):
            return None
        document = self.read_json(relative)
        try:
            return Manifest.from_dict(document)
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise DamagedArtifact(self.uri(relative),
                                  f"is damaged: not a manifest ({type(exc).__name__}: {exc})"
                                  ) from None

    def cached(self, stage: str, key: str) -> Manifest | None:
        """The published artifact of `stage` under `key` when it is intact: its manifest
        reads, and every part exists with the sha256 recorded. A damaged one is a cache miss
        (logged, naming what is damaged), so the stage is computed and published again
        instead of every later run stopping on it."""
        try:
            manifest = self.manifest(stage, key)
            if manifest is not None:
                self.verify(manifest)
        except DamagedArtifact as exc:
            log.warning("stage %s: the stored artifact is damaged (%s %s); computing it "
                        "again", stage, exc.uri, exc.problem)
            return None
        return manifest

    def verify(self, manifest: Manifest) -> None:
        """Raise `DamagedArtifact` unless every part of `manifest` hashes as recorded."""
        for part in manifest.parts:
            self._checked(part, self.read_bytes(part.path))

    def write_part(self, relative: str, frame: pl.DataFrame) -> Part:
        data = _frame_bytes(frame)
        self.write_bytes(relative, data)
        return Part(relative, hashlib.sha256(data).hexdigest(), frame.height)

    def write_part_bytes(self, relative: str, data: bytes, rows: int) -> Part:
        """A part already encoded as Parquet (for encodings polars does not write)."""
        self.write_bytes(relative, data)
        return Part(relative, hashlib.sha256(data).hexdigest(), rows)

    def publish(
        self,
        stage: str,
        key: str,
        frames: Iterable[pl.DataFrame] | pl.DataFrame,
        *,
        extra: dict[str, Any] | None = None,
        parts: Sequence[Part] = (),
        schema: dict[str, str] | None = None,
    ) -> Manifest:
        """Write frames as parts (plus already written `parts`), then the manifest last."""
        prefix = self.stage_prefix(stage, key)
        written = list(parts)
        import polars as pl  # here: commands that only read JSON never load polars

        if isinstance(frames, pl.DataFrame):
            frames = [frames]
        for frame in frames:
            if schema is None:
                schema = {name: str(dtype) for name, dtype in frame.schema.items()}
            written.append(self.write_part(f"{prefix}/part-{len(written):05d}.parquet", frame))
        digest = hashlib.sha256("".join(p.sha256 for p in written).encode()).hexdigest()
        manifest = Manifest(
            stage=stage,
            key=key,
            uri=self.uri(prefix),
            sha256=digest,
            rows=sum(p.rows for p in written),
            schema=schema or {},
            parts=tuple(written),
            extra=extra or {},
        )
        self.write_json(f"{prefix}/{MANIFEST}", manifest.to_dict())
        return manifest

    def read(
        self,
        manifest: Manifest,
        columns: Sequence[str] | None = None,
        where: pl.Expr | None = None,
        held: Mapping[str, tuple[str, pl.DataFrame]] | None = None,
    ) -> pl.DataFrame:
        """The artifact's rows (only `columns`; only rows matching `where`, filtered part by
        part so the unfiltered table is never in memory at once). `held`: frames this
        process wrote, by part path, with their sha256: a part that is one of them is not
        read back."""
        import polars as pl

        def part(p: Part) -> pl.DataFrame:
            found = held.get(p.path) if held else None
            if found is None or found[0] != p.sha256:
                return self.read_part(p, columns)
            return found[1].select(columns) if columns else found[1]

        frames = [part(p) for p in manifest.parts] if where is None else [
            part(p).filter(where) for p in manifest.parts
        ]
        if not frames:
            return pl.DataFrame()
        return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]

    def _checked(self, part: Part, data: bytes) -> bytes:
        if hashlib.sha256(data).hexdigest() != part.sha256:
            raise DamagedArtifact(
                self.uri(part.path),
                "does not match its manifest (sha256 differs): it was changed or cut short "
                "after it was written",
            )
        return data

    def read_part_bytes(self, part: Part) -> bytes:
        """A part's bytes, checked against the sha256 its manifest recorded."""
        return self._checked(part, self.read_bytes(part.path))

    def read_part(self, part: Part, columns: Sequence[str] | None = None) -> pl.DataFrame:
        data = self.read_part_bytes(part)
        import polars as pl

        return pl.read_parquet(io.BytesIO(data), columns=list(columns) if columns else None)

    def chunk_parts(self, stage: str, key: str) -> list[Part]:
        """Completed chunk files of an unfinished stage, oldest first (for --resume)."""
        return [part for part, _ids in self.chunk_ids(stage, key)]

    def chunk_ids(self, stage: str, key: str,
                  written: Mapping[str, tuple[Part, pl.Series]] | None = None,
                  ) -> list[tuple[Part, pl.Series]]:
        """`chunk_parts` with each chunk's request ids (read once for both); a chunk this
        process wrote (`written`: by store path) is not read back."""
        prefix = self.stage_prefix(stage, key)
        found = []
        for name in self.list_dir(prefix):
            if name.startswith("chunk-") and name.endswith(".parquet"):
                relative = f"{prefix}/{name}"
                if written and relative in written:
                    found.append(written[relative])
                    continue
                data = self.read_bytes(relative)
                import polars as pl

                try:
                    ids = pl.read_parquet(io.BytesIO(data), columns=["request_id"])["request_id"]
                except Exception as exc:  # polars' errors have no common base but Exception
                    raise DamagedArtifact(
                        self.uri(relative), f"is damaged: not a results chunk ({exc})",
                        "delete that file to send its requests again with `--resume RUN`",
                    ) from None
                found.append((Part(relative, hashlib.sha256(data).hexdigest(), ids.len()), ids))
        return found


def json_text(data: Any) -> str:
    """The JSON text of `data` as the store writes it (`json_bytes` without the newline)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def json_bytes(data: Any, *, per_case: Sequence[str] = (), plain: bool = False) -> bytes:
    """How the store writes JSON. Compact: only the C encoder is fast, and it cannot indent
    (an indented report of 100k cases costs seconds in the pure-Python encoder). `-o`
    output stays indented. `per_case`, `plain`: see `json_pieces`."""
    return b"".join(json_pieces(data, per_case=per_case, plain=plain))


# A piece of a file the store writes: bytes, or a view of bytes kept elsewhere (a file
# mapped in memory).
Piece = bytes | memoryview
# The text of a per-case list's first items, made before the list was written: (the very
# list, how many of its first items, their JSON text between the list's brackets).
WrittenItems = tuple[list[Any], int, Piece]


def json_pieces(data: Any, *, per_case: Sequence[str] = (), plain: bool = False,
                written: Mapping[str, WrittenItems] | None = None) -> list[Piece]:
    """`json_bytes` in pieces, to be written one after the other (a per-case list is
    megabytes: joining the pieces would copy them once more).

    `per_case` names top-level lists of a mapping (a report's per-case results) whose
    values were checked when they were stored (finite numbers): those are written by
    orjson, about six times faster, to the same bytes (`_per_case_json`). `plain`: their
    writer knows they hold no float below 1e-4 (the only ones orjson spells otherwise), so
    orjson's text is not scanned for one. `written`: by key, the text of a per-case list's
    first items made already (`per_case_json`), used only for that very list.
    """
    if not per_case or not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return [(json_text(data) + "\n").encode()]
    pieces: list[Piece] = [b"{"]
    for key, value in data.items():
        pieces += (json_text(key).encode(), b":")
        if key in per_case and isinstance(value, list):
            pieces += _per_case_pieces(value, plain, (written or {}).get(key))
        else:
            pieces.append(json_text(value).encode())
        pieces.append(b",")
    pieces[-1] = b"}\n" if len(pieces) > 1 else b"{}\n"
    return pieces


def _per_case_pieces(items: list[Any], plain: bool, written: WrittenItems | None,
                     ) -> list[Piece]:
    """`_per_case_json(items)` in pieces: the text of its first items made already
    (`written`, when it is of this very list) and the rest's."""
    if written is None or written[0] is not items or not written[1]:
        return [_per_case_json(items, plain=plain)]
    _items, count, text = written
    if count == len(items):
        return [b"[", text, b"]"]
    return [b"[", text, b",", memoryview(_per_case_json(items[count:], plain=plain))[1:]]


def _per_case_json(items: list[Any], *, plain: bool = False) -> bytes:
    """`json_text(items)` as UTF-8, written by orjson where it writes the same bytes
    (`per_case_json`)."""
    fast = per_case_json(items, plain=plain)
    return json_text(items).encode() if fast is None else fast


def per_case_json(items: list[Any], *, plain: bool = False) -> bytes | None:
    """orjson's text of `items` where it is `json_text`'s as UTF-8, else None.

    orjson spells floats below 1e-4 differently (`0.00001`, `1e-7` for `1e-05`, `1e-07`)
    and refuses what only the json module writes (numpy scalars, keys that are not
    strings, integers beyond 64 bits, lone surrogates): either way the json module writes
    them. Unlike it, orjson writes NaN as null: only lists whose numbers were checked
    finite when stored come here.
    """
    import orjson

    try:
        fast = orjson.dumps(items)
    except TypeError:  # orjson.JSONEncodeError
        return None
    return None if not plain and _small_float_spelled(fast) else fast


def _small_float_spelled(text: bytes) -> bool:
    """Whether orjson may have spelled a float below 1e-4: a number that starts `0.0000`
    or a digit before `e-` (inside a string too: then the json module writes the list)."""
    return _after_a_digit(text, b"0.0000", expected=False) or _after_a_digit(
        text, b"e-", expected=True)


def _after_a_digit(text: bytes, piece: bytes, *, expected: bool) -> bool:
    """Whether `piece` occurs in `text` with a digit before it (`expected` True) or with
    no digit before it (False)."""
    at = text.find(piece)
    while at >= 0:
        if (at > 0 and text[at - 1] in b"0123456789") == expected:
            return True
        at = text.find(piece, at + 1)
    return False


def _check_local_root(root: str) -> None:
    """A local store is a folder, or a path where one can be made: a file there (or on
    the way there) is exit 2 up front, never a store that silently holds no runs."""
    try:
        found = os.stat(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise store_os_error(exc, "open the store", root) from None
    if not stat.S_ISDIR(found.st_mode):
        raise DecflowError(f"store: {root} is a file, not a folder; pass --store a folder "
                           f"(or set {STORE_ENV})")


def store_url(option: str | None = None) -> str:
    """The store to use: the given URL, else `$DECFLOW_STORE`, else `.decflow` here."""
    return option or os.environ.get(STORE_ENV) or DEFAULT_STORE


def open_store(store: Store | str | os.PathLike[str] | None = None) -> Store:
    """A `Store`, given one, a URL or path, or nothing (see `store_url`)."""
    if isinstance(store, Store):
        return store
    return Store(store_url(None if store is None else os.fspath(store)))
