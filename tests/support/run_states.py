"""What `decflow runs` says of a run, for the tests of run states (running, interrupted,
failed, finished) across run kinds."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.servers.counting import CountingService


def only_run(store: Path) -> str:
    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    return run_id


def listed(store: Path, run_id: str) -> tuple[str, list[str]]:
    """(status column of the run's row in `decflow runs`, its note lines)."""
    code, text, err = run_cli("runs", "--store", str(store))
    assert code == 0, err
    (row,) = [line for line in text.splitlines() if line.startswith(f"{run_id} ")
              and "  " in line]
    notes = [line for line in text.splitlines() if line.startswith(f"{run_id} ")
             and line != row]
    return row.split()[-2], notes


def wait_for(service: CountingService, more: int, process: subprocess.Popen[bytes]) -> None:
    """Until the service has received `more` requests than now (the run is calling)."""
    target = service.total_received() + more
    deadline = time.monotonic() + 60
    while service.total_received() < target:
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
