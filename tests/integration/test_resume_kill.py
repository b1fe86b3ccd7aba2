"""Crash safety of the call stage: `decflow test` against a slow HTTP decision service is
killed with SIGKILL while it is calling the backend, then finished with `--resume RUN`.

The service (stdlib, decguard.http/0.1 on 127.0.0.1) counts every request per case id,
so the test sees exactly what was sent again after the kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.support.cli import start_decflow
from tests.support.compare import normalized
from tests.support.servers.counting import CountingService, counting_service, write_contract

pytestmark = pytest.mark.slow

# killed before its first result chunk (2,048 rows where a journal keeps each result):
# the journal alone holds the answers the resumed run must not send again
CASES = 600
MAX_CONCURRENCY = 4
KILL_AFTER = 420  # requests received by the service


@pytest.fixture(scope="module")
def service() -> Iterator[CountingService]:
    with counting_service() as running:
        yield running


def kill_when_sent(service: CountingService, process: subprocess.Popen[bytes],
                   count: int) -> None:
    """SIGKILL `process` once the service has received `count` more requests."""
    before = sum(service.snapshot()[0].values())
    deadline = time.monotonic() + 120
    while sum(service.snapshot()[0].values()) - before < count:
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def contract(service: CountingService, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_contract(tmp_path_factory.mktemp("kill-contract"), service.url, CASES,
                          MAX_CONCURRENCY)


def finished(process: subprocess.Popen[bytes]) -> int:
    _, err = process.communicate(timeout=300)
    assert process.returncode in (0, 1), err.decode()
    return process.returncode


def recorded_ids(store: Path) -> set[str]:
    """Results the killed run left in the store: chunk files and per-result journals."""
    from decflow.pipeline.contract_run.journal import SUFFIX, journal_rows

    ids: set[str] = set()
    for chunk in store.glob("stages/results/*/chunk-*.parquet"):
        ids.update(pl.read_parquet(chunk, columns=["request_id"])["request_id"].to_list())
    for journal in store.glob(f"stages/results/*/chunk-*{SUFFIX}"):
        ids.update(str(row[0]) for row in journal_rows(str(journal)))
    return ids


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    copy = normalized(report, ("results", "summary"))
    copy["run"].pop("store")  # the uninterrupted run has a store of its own
    for ref in copy["run"]["artifacts"].values():
        ref.pop("uri")
    return copy


@pytest.fixture(scope="module")
def killed_and_resumed(
    service: CountingService, contract: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("kill-run")
    store = work / "store"
    before, _ = service.snapshot()
    run = start_decflow("test", str(contract), "--store", str(store), "--no-prefect", cwd=work)
    kill_when_sent(service, run, KILL_AFTER)
    at_kill_received, at_kill_answered = service.snapshot()
    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    recorded = recorded_ids(store)

    resume = start_decflow("test", str(contract), "--store", str(store), "--no-prefect",
                           "--resume", run_id, "-o", str(work / "resumed.json"), cwd=work)
    code = finished(resume)
    after, _ = service.snapshot()
    fresh = start_decflow("test", str(contract), "--store", str(work / "fresh-store"),
                          "--no-prefect", "-o", str(work / "fresh.json"), cwd=work)
    fresh_code = finished(fresh)
    return {
        "before_kill": at_kill_received - before,
        "answered_before_kill": at_kill_answered - before,
        "resumed": after - at_kill_received,
        "recorded": recorded,
        "code": code,
        "fresh_code": fresh_code,
        "report": json.loads((work / "resumed.json").read_text()),
        "fresh": json.loads((work / "fresh.json").read_text()),
        "run_id": run_id,
    }


def test_kill_happened_during_the_call_stage(killed_and_resumed: dict[str, Any]) -> None:
    sent = killed_and_resumed["before_kill"]
    assert KILL_AFTER <= sum(sent.values()) < CASES
    assert killed_and_resumed["recorded"], "no result chunk was recorded before the kill"
    assert killed_and_resumed["recorded"] <= set(sent)


def test_no_recorded_request_is_sent_again(killed_and_resumed: dict[str, Any]) -> None:
    resumed = killed_and_resumed["resumed"]
    recorded = killed_and_resumed["recorded"]
    assert not recorded & set(resumed)
    # everything else is sent exactly once by the resumed run
    all_ids = {f"c{i:04d}" for i in range(CASES)}
    assert set(resumed) == all_ids - recorded
    assert set(resumed.values()) == {1}


def test_in_flight_requests_at_the_kill_are_bounded(killed_and_resumed: dict[str, Any]) -> None:
    in_flight = killed_and_resumed["before_kill"] - killed_and_resumed["answered_before_kill"]
    assert sum(in_flight.values()) <= MAX_CONCURRENCY


def test_only_in_flight_requests_repeat(killed_and_resumed: dict[str, Any]) -> None:
    repeated = set(killed_and_resumed["before_kill"]) & set(killed_and_resumed["resumed"])
    assert len(repeated) <= MAX_CONCURRENCY


def test_resumed_report_equals_an_uninterrupted_run(killed_and_resumed: dict[str, Any]) -> None:
    report, fresh = killed_and_resumed["report"], killed_and_resumed["fresh"]
    assert report["run"]["id"] == killed_and_resumed["run_id"]
    assert killed_and_resumed["code"] == killed_and_resumed["fresh_code"] == report["exit_code"]
    assert report["dataset"]["n_cases"] == CASES
    assert comparable(report) == comparable(fresh)
