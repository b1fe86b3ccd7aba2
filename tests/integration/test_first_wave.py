"""A plain remote `decflow test` sends its first requests before polars is loaded and its
tables are built (`pipeline/contract_run/first_wave.py`): the call stage records those
answers as its own, the run reports what a run without the wave reports (failed answers,
retries and timeouts included), a run stopped before its call stage has recorded none of
them (`--resume` sends them again), and one stopped after keeps those it recorded."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from decflow.store.store import Store
from tests.support.cli import RUN_DECFLOW, run_cli
from tests.support.compare import normalized
from tests.support.servers.counting import CountingService, counting_service, write_contract

CASES = 120
WAVE_ANSWERS = 4  # what the wave has answered before the stages go on (held till then)

# Runs `decflow ARGS` with the import of polars held back until the first request is
# written (at most 60 s): a first request that needed polars would only go out after
# that. Prints what happened first.
POLARS_HELD = """
import asyncio.selector_events as events, sys, threading
sent, order = threading.Event(), []
write = events._SelectorSocketTransport.write
def first(self, data):
    if not sent.is_set():
        order.append("request")
        sent.set()
    return write(self, data)
events._SelectorSocketTransport.write = first
class Hold:
    def find_spec(self, name, path, target=None):
        if name == "polars":
            sys.meta_path.remove(self)
            order.append("polars" if sent.wait(60) else "polars, no request after 60 s")
        return None
sys.meta_path.insert(0, Hold())
sys.argv = ["decflow", *sys.argv[1:]]
import atexit
atexit.register(lambda: print(" then ".join(order), flush=True))
from decflow.__main__ import main
main()
"""


def test_the_first_request_goes_out_before_polars_is_imported(tmp_path: Path) -> None:
    with counting_service(delay_s=0.005) as service:
        contract = write_contract(tmp_path, service.url, 20, max_concurrency=4)
        done = subprocess.run(
            [sys.executable, "-c", POLARS_HELD, "test", str(contract), "--no-healthcheck",
             "--store", str(tmp_path / "store")],
            capture_output=True, text=True, timeout=180, check=False)
        sent = service.snapshot()[0]
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "request then polars"
    assert set(sent.values()) == {1} and len(sent) == 20  # each case asked once


def answered(wave: Any) -> int:
    """How many of the wave's requests have their answer."""
    return sum(answer.done() for answer in list(wave.sent.values()))


def _wave_answers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The wave holds its answers back until it has `WAVE_ANSWERS` of them (as a run
    whose tables take long to build); returns the count each take found."""
    from decflow.pipeline.contract_run import first_wave

    taken: list[int] = []
    take = first_wave.FirstWave.take

    def taking(self: first_wave.FirstWave) -> dict[str, Future[tuple[Any, ...] | None]]:
        deadline = time.monotonic() + 60
        while answered(self) < WAVE_ANSWERS and time.monotonic() < deadline:
            time.sleep(0.002)
        sent = take(self)
        taken.append(len(sent))
        return sent

    monkeypatch.setattr(first_wave.FirstWave, "take", taking)
    return taken


def _results(store: Store, report: dict[str, Any]) -> pl.DataFrame:
    from decflow.store.runs import read_run_record
    from decflow.store.store import Manifest

    manifest = read_run_record(store, report["run"]["id"])["stages"]["results"]
    return store.read(Manifest.from_dict(manifest)).drop("latency_ms").sort("request_id")


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    copy = normalized(report, ("results", "summary"))
    copy["run"].pop("store")
    for ref in copy["run"]["artifacts"].values():
        ref.pop("uri")
    return copy


def test_the_call_stage_records_the_waves_answers_as_a_run_without_it_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.pipeline.contract_run import first_wave

    taken = _wave_answers(monkeypatch)
    reports = []
    with counting_service(delay_s=0.005) as service:
        service.failing_ids = {"c0002"}  # an error the wave records too
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=4)
        for name in ("wave", "plain"):
            out = tmp_path / f"{name}.json"
            code, _, err = run_cli("test", str(contract), "--no-healthcheck", "--store",
                                   str(tmp_path / name), "-o", str(out))
            assert code in (0, 1), err
            reports.append(json.loads(out.read_text()))
            monkeypatch.setattr(first_wave, "start", lambda _spec: None)
        sent = service.snapshot()[0]
    # one round: the wave sent max_concurrency requests, no more, though all were answered
    assert taken == [4]
    assert set(sent.values()) == {2}  # each case asked once per run: no answer asked again
    wave, plain = reports
    assert _comparable(wave) == _comparable(plain)
    assert_frame_equal(_results(Store(str(tmp_path / "wave")), wave),
                       _results(Store(str(tmp_path / "plain")), plain))


# Runs `decflow ARGS` and sends it SIGINT while it builds the `cases` stage's table, once
# its first wave has `WAVE_ANSWERS` answers.
INTERRUPTED_IN_THE_WAVE = """
import os, signal, sys, time
from decflow.pipeline.contract_run import first_wave, inputs
waves = []
begin = first_wave.FirstWave.begin
def beginning(self):
    waves.append(self)
    begin(self)
first_wave.FirstWave.begin = beginning
load = inputs.load_golden
def loading(*args, **kwargs):
    deadline = time.monotonic() + 60
    while sum(f.done() for f in list(waves[0].sent.values())) < WAVE_ANSWERS \\
            and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
    return load(*args, **kwargs)
inputs.load_golden = loading
""".replace("WAVE_ANSWERS", str(WAVE_ANSWERS)) + RUN_DECFLOW


def test_a_run_interrupted_during_its_first_wave_has_recorded_nothing_and_resumes(
        tmp_path: Path) -> None:
    from tests.integration.test_resume_kill import recorded_ids

    store = tmp_path / "store"
    with counting_service(delay_s=0.005) as service:
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=4)
        stopped = subprocess.run(
            [sys.executable, "-c", INTERRUPTED_IN_THE_WAVE, "test", str(contract),
             "--no-healthcheck", "--store", str(store)],
            capture_output=True, text=True, timeout=180, check=False)
        before = service.snapshot()[0]
        assert stopped.returncode == 130, stopped.stderr
        (run_id,) = [p.name for p in (store / "runs").iterdir()]
        record = json.loads((store / "runs" / run_id / "run.json").read_text())
        recorded = recorded_ids(store)
        code, _, err = run_cli("test", str(contract), "--store", str(store), "--resume",
                               run_id, "-o", str(tmp_path / "resumed.json"))
        after = service.snapshot()[0]
        code_fresh, _, err_fresh = run_cli("test", str(contract), "--no-healthcheck",
                                           "--store", str(tmp_path / "fresh"), "-o",
                                           str(tmp_path / "fresh.json"))
    assert sum(before.values()) >= WAVE_ANSWERS  # the wave had been answered
    assert record["status"] == "interrupted" and "results" not in record["stages"]
    assert recorded == set()  # no chunk, no journal: nothing kept of the wave
    assert code == code_fresh and code in (0, 1), err + err_fresh
    resumed = after - before
    assert set(resumed.values()) == {1} and len(resumed) == CASES  # every case asked again
    assert _comparable(json.loads((tmp_path / "resumed.json").read_text())) == _comparable(
        json.loads((tmp_path / "fresh.json").read_text()))


class _Misbehaving(CountingService):
    """The counting service, where some cases get what servers send when things go
    wrong: a 503 answered on the retry, a 503 every time (retried), a 500 (not retried),
    a body that is not JSON, probabilities that do not add up, an answer after the
    client's timeout, and a connection closed without an answer."""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        base = super().handler()
        service = self

        class Handler(base):  # type: ignore[valid-type,misc]
            def decide(self, request: dict[str, Any], case_id: str) -> None:
                with service.lock:
                    attempt = service.received[case_id]
                kind = MISBEHAVING.get(case_id)
                # ("503 once": the first try of each run)
                if kind == "503" or (kind == "503 once" and attempt % 2 == 1):
                    self.reply(b'{"error": "busy"}', status=503)
                elif kind == "500":
                    self.reply(b'{"error": "down"}', status=500)
                elif kind == "malformed":
                    self.reply(b'{"probabilities": ')
                elif kind == "unnormalized":
                    self.reply(json.dumps({"probabilities": {"refund": 0.9, "reject": 0.9,
                                                             "review": 0.9}}).encode())
                elif kind == "late":
                    time.sleep(TIMEOUT_S * 3)
                    self.reply(b'{}')
                elif kind == "closed":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    super().decide(request, case_id)

        return Handler


MISBEHAVING = {"c0001": "503 once", "c0002": "503", "c0003": "malformed", "c0004": "500",
               "c0005": "unnormalized", "c0006": "late", "c0009": "closed"}
# each one's error kind, in the order of their case ids (c0001 is answered on its retry)
KINDS = ["unavailable", "invalid_response", "backend_error", "invalid_response", "timeout",
         "unavailable"]
TIMEOUT_S = 0.5


def test_failed_answers_in_the_wave_are_recorded_and_retried_as_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.pipeline.contract_run import first_wave

    taken = _wave_answers(monkeypatch)
    service = _Misbehaving(delay_s=0.005)
    service.thread.start()
    try:
        # a round of 10: the wave sends every misbehaving case (c0001-c0009)
        contract = write_contract(tmp_path, service.url, 40, max_concurrency=10)
        document = yaml.safe_load(contract.read_text())
        document["backend"].update(timeout_s=TIMEOUT_S, max_retries=2, retry_backoff_s=0.01)
        contract.write_text(yaml.safe_dump(document, sort_keys=False))
        reports, asked = [], []
        for name in ("wave", "plain"):
            before = service.snapshot()[0]
            code, _, err = run_cli("test", str(contract), "--no-healthcheck", "--store",
                                   str(tmp_path / name), "-o", str(tmp_path / f"{name}.json"))
            assert code in (0, 1), err
            reports.append(json.loads((tmp_path / f"{name}.json").read_text()))
            asked.append(service.snapshot()[0] - before)
            monkeypatch.setattr(first_wave, "start", lambda _spec: None)
    finally:
        service.server.shutdown()
        service.server.server_close()
    assert taken == [10]  # every one sent by the wave
    # A connection closed as a request went out is sent once more if it was a kept-alive
    # one (`http11`: the stale-connection case), whichever thread sends it.
    assert {asked[0].pop("c0009"), asked[1].pop("c0009")} <= {1, 2}
    assert asked[0] == asked[1]  # the same tries of each case (retries included)
    assert (asked[0]["c0001"], asked[0]["c0002"], asked[0]["c0004"]) == (2, 3, 1)
    wave, plain = (_results(Store(str(tmp_path / name)), report)
                   for name, report in zip(("wave", "plain"), reports, strict=True))
    errors = dict(zip(wave["request_id"], wave["error_kind"], strict=True))
    assert [errors[case] for case in sorted(MISBEHAVING)] == [None, *KINDS]
    assert_frame_equal(wave, plain)
    assert _comparable(reports[0]) == _comparable(reports[1])


# Runs `decflow ARGS`, its call stage taking the first wave once `WAVE_ANSWERS` of its
# requests are answered (their ids are printed), and sends it SIGINT once the call stage
# has gone past them: once it has recorded 4 results more than the wave had sent (so at
# most 4 are in flight, every request of the wave was taken from the shard's requests).
INTERRUPTED_AFTER_THE_TAKEOVER = """
import os, signal, sys, time
from decflow.backends import engine
from decflow.pipeline.contract_run import first_wave
take = first_wave.FirstWave.take
def taking(self):
    deadline = time.monotonic() + 60
    while sum(f.done() for f in list(self.sent.values())) < WAVE_ANSWERS \\
            and time.monotonic() < deadline:
        time.sleep(0.002)
    sent = take(self)
    print(" ".join(i for i, f in list(sent.items()) if f.done()), flush=True)
    return sent
first_wave.FirstWave.take = taking
run = engine.RemoteCaller.run
def running(self, *args, on_result=None, answered=None, **kwargs):
    if answered:
        last, recorded = len(answered) + 4, []
        def recording(row):
            recorded.append(row)
            if len(recorded) == last:
                os.kill(os.getpid(), signal.SIGINT)
            on_result(row)
        return run(self, *args, on_result=recording, answered=answered, **kwargs)
    return run(self, *args, on_result=on_result, answered=answered, **kwargs)
engine.RemoteCaller.run = running
""".replace("WAVE_ANSWERS", str(WAVE_ANSWERS)) + RUN_DECFLOW


def test_a_run_interrupted_after_taking_its_first_wave_keeps_its_answers(
        tmp_path: Path) -> None:
    from tests.integration.test_resume_kill import recorded_ids

    store = tmp_path / "store"
    with counting_service(delay_s=0.005) as service:
        contract = write_contract(tmp_path, service.url, 600, max_concurrency=4)
        stopped = subprocess.run(
            [sys.executable, "-c", INTERRUPTED_AFTER_THE_TAKEOVER, "test", str(contract),
             "--no-healthcheck", "--store", str(store)],
            capture_output=True, text=True, timeout=180, check=False)
        before = service.snapshot()[0]
        (run_id,) = [p.name for p in (store / "runs").iterdir()]
        recorded = recorded_ids(store)
        code, _, err = run_cli("test", str(contract), "--store", str(store), "--resume",
                               run_id, "-o", str(tmp_path / "resumed.json"))
        resumed = service.snapshot()[0] - before
    assert stopped.returncode == 130, stopped.stderr
    answered_in_the_wave = set(stopped.stdout.split())
    assert len(answered_in_the_wave) >= WAVE_ANSWERS
    assert answered_in_the_wave <= recorded  # recorded by the call stage, kept
    assert code in (0, 1), err
    assert set(resumed) == {f"c{i:04d}" for i in range(600)} - recorded
    assert set(resumed.values()) == {1}
    asked_twice = [case for case, count in (before + resumed).items() if count > 1]
    assert len(asked_twice) <= 4  # at most the requests in flight at the signal


# Runs `decflow ARGS`, its call stage taking the first wave once 4 of its requests are
# sent (none is answered: the service holds them), and sends it SIGINT 0.2 s later, while
# the call stage waits for them.
INTERRUPTED_WAITING_FOR_THE_WAVE = """
import os, signal, sys, threading, time
from decflow.pipeline.contract_run import first_wave
take = first_wave.FirstWave.take
def taking(self):
    deadline = time.monotonic() + 60
    while len(self.sent) < 4 and time.monotonic() < deadline:
        time.sleep(0.002)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    return take(self)
first_wave.FirstWave.take = taking
""" + RUN_DECFLOW


def test_a_run_waiting_for_its_waves_requests_in_flight_stops_at_a_signal(
        tmp_path: Path) -> None:
    with counting_service(delay_s=0.005) as service:
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=4)
        service.hold()  # every request waits: the wave's are in flight when taken
        stopped = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTED_WAITING_FOR_THE_WAVE, "test", str(contract),
             "--no-healthcheck", "--store", str(tmp_path / "store")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            code = stopped.wait(timeout=60)  # (a hang waits for the held answers: 60 s)
            held = service.waiting()
        finally:
            stopped.kill()
        err = stopped.communicate()[1].decode()
        received = service.total_received()
    assert code == 130, err
    assert err.strip().splitlines()[-1].startswith("error: interrupted"), err
    assert received == 4 and held == 4  # the wave's, never answered
