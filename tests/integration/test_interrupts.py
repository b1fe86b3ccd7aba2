"""SIGINT and SIGTERM stop a run at any point: exit 130 or 143 within 5 s, one
`error: interrupted…` line, no traceback, and no request started once the signal arrived.

Twenty points of `decflow test` against a slow decision service (the counting service,
which records when each request starts): while the command starts (imports, contract,
stages before the calls), and while it calls, after a growing number of answers. At the
"held" points every request in flight is waiting in the service (its answers held back),
so the client is idle in its event loop and any request the service sees after the signal
was sent after it: there must be none. At the "busy" points answers flow freely, so the
client may be anywhere (writing a request, recording a chunk, printing progress) and a
request it wrote just before the signal may reach the service just after: at most the
run's concurrency may, all within a second, never a run that keeps calling.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import start_decflow
from tests.support.servers.counting import CountingService, counting_service, write_contract

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

CASES = 600  # never finished: every point stops the run
CONCURRENCY = 4
STOP_WITHIN_S = 5.0

# (how the point is reached, its parameter, the signal)
POINTS = [
    ("started", 0.0, signal.SIGINT),
    ("started", 0.05, signal.SIGTERM),
    ("started", 0.15, signal.SIGINT),
    ("started", 0.3, signal.SIGINT),
    ("held", 0, signal.SIGINT),
    ("held", 1, signal.SIGTERM),
    ("held", 4, signal.SIGINT),
    ("held", 9, signal.SIGINT),
    ("held", 17, signal.SIGINT),
    ("held", 33, signal.SIGTERM),
    ("held", 61, signal.SIGINT),
    ("held", 120, signal.SIGINT),
    ("held", 200, signal.SIGINT),
    ("busy", 2, signal.SIGINT),
    ("busy", 6, signal.SIGTERM),
    ("busy", 13, signal.SIGINT),
    ("busy", 27, signal.SIGINT),
    ("busy", 50, signal.SIGTERM),
    ("busy", 90, signal.SIGINT),
    ("busy", 150, signal.SIGINT),
]
# With --no-healthcheck a run's first requests are its first wave's, sent on a thread of
# their own while the stages before the calls are built (`first_wave.py`): the first
# answers of these points come from the wave, before or just as the call stage takes it.
WAVE_POINTS = [
    ("held", 1, signal.SIGINT),
    ("held", 4, signal.SIGTERM),
    ("busy", 2, signal.SIGINT),
    ("busy", 6, signal.SIGTERM),
]


@pytest.fixture(scope="module")
def service() -> Iterator[CountingService]:
    with counting_service(delay_s=0.002) as running:
        yield running


@pytest.fixture(scope="module")
def contract(service: CountingService, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_contract(tmp_path_factory.mktemp("interrupts"), service.url, CASES,
                          CONCURRENCY)


def handles_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (decflow's, installed before anything
    else: Python itself leaves SIGTERM alone)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def wait_until(condition: object, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.001)


def answered(service: CountingService) -> int:
    return sum(service.snapshot()[1].values())


@pytest.mark.parametrize(
    ("kind", "at", "signum", "wave"),
    [(*point, False) for point in POINTS] + [(*point, True) for point in WAVE_POINTS],
    ids=[f"{kind}-{at}-{signal.Signals(s).name}" for kind, at, s in POINTS]
    + [f"wave-{kind}-{at}-{signal.Signals(s).name}" for kind, at, s in WAVE_POINTS])
def test_a_signal_stops_the_run_at_once_and_nothing_is_sent_after_it(
    kind: str, at: float, signum: int, wave: bool, service: CountingService, contract: Path,
    tmp_path: Path,
) -> None:
    service.release()
    process = start_decflow("test", str(contract), "--store", str(tmp_path / "store"),
                            *(["--no-healthcheck"] if wave else []), cwd=tmp_path)
    try:
        wait_until(lambda: process.poll() is not None or handles_sigterm(process.pid),
                   process)
        if kind == "started":
            time.sleep(at)
        else:
            base = answered(service)
            wait_until(lambda: answered(service) >= base + at, process)
            if kind == "held":
                service.hold()
                wait_until(lambda: service.waiting() == CONCURRENCY, process)
        sent = time.monotonic()
        process.send_signal(signum)
        code = process.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        service.release()
        if process.poll() is None:
            process.kill()
    err = process.communicate()[1].decode()
    late = service.started_after(sent)

    assert (code, "Traceback" in err) == (128 + signum, False), err
    assert err.strip().splitlines()[-1].startswith("error: interrupted"), err
    assert took < STOP_WITHIN_S
    if kind == "busy":
        assert len(late) <= CONCURRENCY and all(start < sent + 1.0 for start in late)
    else:
        assert late == []
