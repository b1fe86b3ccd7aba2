"""The call cache keeps what an interrupted run paid for: a `test --call-cache read-write`
interrupted (SIGINT) while it calls and finished with `--resume RUN` stores every answer
the backend gave either attempt, so a repeated identical read-write run sends nothing.

Deterministic: the counting service answers exactly `answered` decisions and then holds
the rest, and the signal is sent once the run has recorded those answers (its chunks and
journals hold them), while every request in flight waits in the service.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from decflow.pipeline.contract_run.journal import SUFFIX, journal_rows
from tests.support.cli import run_cli, start_decflow
from tests.support.servers.counting import CountingService, counting_service, write_contract

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SIGINT by pid")

CASES = 12
SAMPLES = 2  # option orders a case: 12 originals, then 24 transformed requests
REQUESTS = CASES * (1 + SAMPLES)
CONCURRENCY = 2


@pytest.fixture
def service() -> Iterator[CountingService]:
    with counting_service(delay_s=0.0) as running:
        yield running


def contract(folder: Path, service: CountingService) -> Path:
    path = write_contract(folder, service.url, CASES, CONCURRENCY)
    document = yaml.safe_load(path.read_text())
    document["properties"] = {"option_order": {"samples": SAMPLES, "max_tv_distance": 0.9}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def recorded(store: Path) -> int:
    """The results the run recorded so far: its chunk files' rows and its journals'."""
    ids: set[str] = set()
    for chunk in store.glob("stages/results/*/chunk-*.parquet"):
        ids.update(pl.read_parquet(chunk, columns=["request_id"])["request_id"].to_list())
    for journal in store.glob(f"stages/results/*/chunk-*{SUFFIX}"):
        ids.update(str(row[0]) for row in journal_rows(str(journal)))
    return len(ids)


def interrupt_after(service: CountingService, process: subprocess.Popen[bytes], store: Path,
                    answered: int) -> None:
    """SIGINT `process` once it recorded the `answered` decisions the service gives."""
    deadline = time.monotonic() + 120
    while recorded(store) < answered or service.waiting() < CONCURRENCY:
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()
    assert recorded(store) == answered


def run(service: CountingService, path: Path, store: Path, *args: str
        ) -> tuple[dict[str, Any], Counter[str]]:
    """`test --all` with `args`: (its report, what the service received meanwhile)."""
    before, _ = service.snapshot()
    out = store.parent / f"report-{len(list(store.parent.glob('report-*')))}.json"
    code, _, err = run_cli("test", "--all", str(path), "--store", str(store), "-o", str(out), *args)
    assert code in (0, 1), err
    after, _ = service.snapshot()
    return json.loads(out.read_text()), after - before


@pytest.mark.parametrize(("answered", "flags"), [
    (5, ()),  # in the originals' shard
    (CASES + 7, ()),  # in the transformed requests' shard, the originals' all recorded
    (4, ("--sequential", "--order-seed", "3", "--batch", "2")),  # within a batch
], ids=["originals", "transformed", "sequential"])
def test_a_resumed_run_stores_what_the_interrupted_one_paid_for(
    tmp_path: Path, service: CountingService, answered: int, flags: tuple[str, ...],
) -> None:
    path, store = contract(tmp_path, service), tmp_path / "store"
    service.hold_after(answered)
    process = start_decflow("test", "--all", str(path), "--store", str(store),
                            "--call-cache", "read-write", *flags, cwd=tmp_path)
    try:
        interrupt_after(service, process, store, answered)
    finally:
        service.release()
        if process.poll() is None:
            process.kill()
    (run_id,) = [p.name for p in (store / "runs").iterdir()]

    resumed, sent = run(service, path, store, "--resume", run_id)
    assert resumed["call_cache"]["mode"] == "read-write"
    if not flags:  # the requests held at the signal are sent again, nothing recorded is
        assert sum(sent.values()) == REQUESTS - answered
        assert resumed["call_cache"]["requests_sent"] == REQUESTS

    repeated, sent = run(service, path, store, "--call-cache", "read-write", *flags)
    assert sum(sent.values()) == 0
    assert repeated["call_cache"]["requests_sent"] == 0
    assert repeated["exit_code"] == resumed["exit_code"]
    if not flags:
        assert repeated["call_cache"]["served_from_cache"] == REQUESTS
