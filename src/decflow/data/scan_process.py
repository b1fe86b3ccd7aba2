"""Scanning a large local record source in a child process (`scan_beside`).

A check hashes and counts its input while the same interpreter imports polars, Arrow and
the contract models. In a thread, the scan hands the GIL back and forth with those imports
on every block and every numpy call: measured on 300k JSONL records (123 MB), 0.15 s alone
and 0.35–0.45 s beside a check's start. In a child process (`python -P -s -m
decflow.data.scan_process SOURCE`: nothing in the working directory is importable there,
`decflow.workers.command`) it shares no GIL; the child prints one JSON line, the
scan or the `DatasetError` it met. Whatever else goes wrong with the child (it cannot
start, it dies, it prints something else), the scan runs again in this process, which then
fails or succeeds exactly as a scan without a child would.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from decflow import interrupts
from decflow.data.records.units import (
    Scanned,
    ScannedFile,
    list_partitions,
    scan_in_background,
    scan_source,
)
from decflow.errors import DatasetError
from decflow.store.remote import is_url
from decflow.workers.command import python_module
from decflow.workers.lifetime import child_environment, die_with_parent

# Below this many bytes a thread scans faster than a child process starts (≈ 0.07 s with
# numpy imported).
PROCESS_SCAN_BYTES = 32 << 20

def worth_a_process(source: str | Path) -> bool:
    """Whether `source` is local and holds at least `PROCESS_SCAN_BYTES` of files. A source
    that cannot be listed is not (the scan in this process reports why)."""
    if isinstance(source, str) and is_url(source):
        return False
    try:
        files = list_partitions(source)
        return sum(Path(f).stat().st_size for f in files) >= PROCESS_SCAN_BYTES
    except (DatasetError, OSError):
        return False


def scan_beside(source: str | Path) -> Callable[[], Scanned]:
    """Start `scan_source(source)` in a child process now (in a thread if no child can be
    started); the returned function waits for it (raising its `DatasetError`). A child still
    scanning when this process exits is stopped."""
    try:
        child = subprocess.Popen(
            python_module("decflow.data.scan_process", str(source)),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            # no BLAS, no spinning pool; and it dies with this process (workers.lifetime)
            env={**child_environment(), "OPENBLAS_NUM_THREADS": "1"},
        )
    except OSError:
        return scan_in_background(source)
    atexit.register(child.kill)  # a no-op once it has ended

    def wait() -> Scanned:
        out = interrupts.communicate(child)
        atexit.unregister(child.kill)
        answer = _answer(out) if child.returncode == 0 else None
        if answer is None:
            return scan_source(source)
        if "error" in answer:
            raise DatasetError(answer["error"])
        return answer["files"], [_scanned(s) for s in answer["scanned"]]

    return wait


def _answer(out: bytes) -> dict[str, Any] | None:
    try:
        answer = json.loads(out)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _scanned(data: dict[str, Any]) -> ScannedFile:
    rows = data["row_group_rows"]
    return ScannedFile(
        data["path"], data["digest"], data["n_records"], None if rows is None else tuple(rows),
        data["size"], tuple(tuple(b) for b in data["blocks"]),
    )


def main(argv: list[str]) -> None:
    """The child: scan `argv[0]` and print the outcome as one JSON line."""
    die_with_parent()
    try:
        files, scanned = scan_source(argv[0])
    except DatasetError as exc:
        answer: dict[str, Any] = {"error": str(exc)}
    else:
        answer = {"files": files, "scanned": [asdict(s) for s in scanned]}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
