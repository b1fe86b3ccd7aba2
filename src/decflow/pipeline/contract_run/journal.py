"""Per-result journal of a call shard (local stores).

Results reach the store as Parquet chunks of a few hundred rows. So that a process killed
between two chunks (even `kill -9`) loses only the requests in flight, each finished
result is also appended, as it arrives, as one JSON line to the shard's journal; one
`write` per line puts it in the OS page cache, which survives the process. `--resume`
turns the journal lines not yet in a chunk into a chunk before sending anything.
Object stores cannot append; there the chunks alone are the record.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import orjson

from decflow.store.store import Store, store_os_error

SUFFIX = ".journal"
# built once: `json.dumps` with options builds an encoder per call (a line per result)
_LINE = json.JSONEncoder(separators=(",", ":"))


def _line(row: tuple[Any, ...]) -> bytes:
    """A row as one JSON line. orjson encodes it ~15 times faster than `json`, and what it
    writes reads back (`journal_rows`) as the same row: a row's floats are finite (the
    engine refuses others), and a row orjson cannot encode (a text with a lone surrogate)
    goes through `json` (ASCII, with escapes)."""
    try:
        return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (_LINE.encode(row) + "\n").encode()


class Journal:
    def __init__(self, store: Store, relative: str) -> None:
        self.path = store.path(relative) if store.is_local else None
        self.handle: int | None = None  # the file's descriptor: one `write` per line

    @property
    def kept(self) -> bool:
        """Whether results are journalled here (a local store)."""
        return self.path is not None

    def record(self, row: tuple[Any, ...]) -> None:
        if self.path is None:
            return
        try:
            if self.handle is None:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self.handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            line = _line(row)
            while line:  # (a write cut short at a file-size limit: the rest raises)
                line = line[os.write(self.handle, line):]
        except OSError as exc:  # a full disk, a file-size limit: exit 2 naming the journal
            if self.handle is not None:
                with contextlib.suppress(OSError):
                    os.close(self.handle)
                self.handle = None
            raise store_os_error(exc, "write", self.path) from None

    def close(self) -> None:
        """The shard finished: every journalled row is in a chunk file now."""
        if self.handle is not None and self.path is not None:
            try:
                os.close(self.handle)
                os.remove(self.path)
            except OSError as exc:
                raise store_os_error(exc, "write", self.path) from None
            finally:
                self.handle = None


def journal_rows(path: str) -> list[tuple[Any, ...]]:
    """The rows of a journal; a line torn by the kill is not a row."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                rows.append(tuple(json.loads(line)))
            except ValueError:
                continue
    return rows
