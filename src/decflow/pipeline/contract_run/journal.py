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
from typing import IO, Any

from decflow.store.store import Store, store_os_error

SUFFIX = ".journal"
# built once: `json.dumps` with options builds an encoder per call (a line per result)
_LINE = json.JSONEncoder(separators=(",", ":"))


class Journal:
    def __init__(self, store: Store, relative: str) -> None:
        self.path = store.path(relative) if store.is_local else None
        self.handle: IO[str] | None = None

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
                self.handle = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            self.handle.write(_LINE.encode(row) + "\n")
        except OSError as exc:  # a full disk, a file-size limit: exit 2 naming the journal
            if self.handle is not None:
                with contextlib.suppress(OSError):  # its buffer cannot be written either
                    self.handle.close()
                self.handle = None
            raise store_os_error(exc, "write", self.path) from None

    def close(self) -> None:
        """The shard finished: every journalled row is in a chunk file now."""
        if self.handle is not None and self.path is not None:
            try:
                self.handle.close()
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
