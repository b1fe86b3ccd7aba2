"""A run's report and view files, recorded by their sha256 in the run's record.

`store.runs.write_run_file` writes `runs/<id>/<name>` (report.json, report.html,
diff.json, …) and then records the sha256 of its bytes under `files` in the run's
`run.json`; `store.runs.read_run_file` reads a file back only if its bytes still hash to
what was recorded, else exit 2 naming the file. A report edited by hand (a FAIL turned
into a PASS, a digit flipped) is refused by every reader — `report`, `diff`, re-gate,
replay, the SDK — and `decflow runs` lists the run as damaged. Runs recorded before the
hashes existed have no `files` entry and are read as they are. This module holds the
rules; `store.runs` the layout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decflow.store.store import Piece

FILES = "files"  # in run.json: file name -> "sha256:…" of the bytes written


def digest(data: bytes | Sequence[Piece]) -> str:
    """The sha256 of `data` (or of its pieces one after the other)."""
    hashed = hashlib.sha256()
    for piece in (data,) if isinstance(data, bytes) else data:
        hashed.update(piece)
    return "sha256:" + hashed.hexdigest()


def recorded(record: Any) -> dict[str, Any]:
    """The `files` hashes of a run record (empty when it has none)."""
    files = record.get(FILES) if isinstance(record, dict) else None
    return files if isinstance(files, dict) else {}


def with_file(record: dict[str, Any], name: str, data: bytes | Sequence[Piece],
              ) -> dict[str, Any]:
    """The record with the sha256 of file `name` (its bytes `data`) recorded."""
    return {**record, FILES: {**recorded(record), name: digest(data)}}


def mismatch(files: dict[str, Any], name: str, data: bytes | None) -> str | None:
    """Why `data` (None: the file is missing) is not the recorded file `name`, or None
    when it is (or when nothing was recorded: a run older than the hashes)."""
    if not files:
        return None
    expected = files.get(name)
    if expected is None:
        return "has no sha256 in the run's record"
    if data is None:
        return "is missing"
    if expected != digest(data):
        return ("does not match the sha256 recorded for it in the run's record (edited or "
                "damaged since it was written)")
    return None
