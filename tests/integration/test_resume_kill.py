"""Crash safety of the call stage: `decflow test` against a slow HTTP decision service is
killed with SIGKILL while it is calling the backend, then finished with `--resume RUN`.

The service (stdlib, decguard.http/0.1 on 127.0.0.1) counts every request per case id,
so the test sees exactly what was sent again after the kill.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.support.compare import normalized

pytestmark = pytest.mark.slow

LABELS = ("refund", "reject", "review")
CASES = 600  # more than one 256-row result chunk
MAX_CONCURRENCY = 4
DELAY_S = 0.02
KILL_AFTER = 420  # requests received by the service


def favoured(text: str) -> str:
    return LABELS[hashlib.sha256(text.encode()).digest()[0] % len(LABELS)]


class CountingService:
    """decguard.http/0.1: POST /decide → probabilities (after DELAY_S); GET /health → 200."""

    def __init__(self) -> None:
        self.received: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        # connections cut by the killed client are expected, not worth a traceback
        self.server.handle_error = lambda *_args: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self.lock:
            return Counter(self.received), Counter(self.answered)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                return

            def reply(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.reply(b'{"status": "ok"}')

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                case_id = request["case_id"]
                with service.lock:
                    service.received[case_id] += 1
                time.sleep(DELAY_S)
                top = favoured(request["input"])
                probabilities = {label: (0.8 if label == top else 0.1)
                                 for label in request["decision"]["labels"]}
                self.reply(json.dumps({"probabilities": probabilities, "model": "counting",
                                       "model_version": "1"}).encode())
                with service.lock:
                    service.answered[case_id] += 1

        return Handler


@pytest.fixture(scope="module")
def service() -> Iterator[CountingService]:
    running = CountingService()
    running.thread.start()
    try:
        yield running
    finally:
        running.server.shutdown()
        running.server.server_close()


def write_contract(folder: Path, service_url: str) -> Path:
    """A refund-like contract on the counting service, with CASES golden cases."""
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(CASES):
            text = f"Request {i}: the item {'arrived damaged' if i % 3 else 'is fine'}."
            handle.write(json.dumps({"id": f"c{i:04d}", "input": text,
                                     "expected": favoured(text)}) + "\n")
    document = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice", "options": list(LABELS)},
        "backend": {"provider": "http", "url": f"{service_url}/decide",
                    "health_url": f"{service_url}/health", "timeout_s": 10},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": MAX_CONCURRENCY},
        "requirements": {"min_accuracy": 0.9},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


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
    return write_contract(tmp_path_factory.mktemp("kill-contract"), service.url)


def decflow(*args: str, cwd: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    return subprocess.Popen([sys.executable, "-m", "decflow", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


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
    run = decflow("test", str(contract), "--store", str(store), "--no-prefect", cwd=work)
    kill_when_sent(service, run, KILL_AFTER)
    at_kill_received, at_kill_answered = service.snapshot()
    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    recorded = recorded_ids(store)

    resume = decflow("test", str(contract), "--store", str(store), "--no-prefect",
                     "--resume", run_id, "-o", str(work / "resumed.json"), cwd=work)
    code = finished(resume)
    after, _ = service.snapshot()
    fresh = decflow("test", str(contract), "--store", str(work / "fresh-store"), "--no-prefect",
                    "-o", str(work / "fresh.json"), cwd=work)
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
