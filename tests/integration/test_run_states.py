"""`decflow runs` tells each run's true state, and a run is worked on by one process at a
time.

Runs against a slow decision service (tests/support/servers/counting.py), as processes of
their own, stopped by SIGINT, SIGTERM and SIGKILL in the call stage: `running` only while
the process holds the run's lock, `interrupted` (with the command that resumes it) after
any of the three, `failed` with the error line after exit 2, `pass`/`fail` once finished;
a second `--resume` of a run being worked on is refused, naming the holder, and sends
nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli, start_decflow
from tests.support.run_states import listed, only_run, wait_for
from tests.support.servers.counting import CountingService, counting_service, write_contract

CASES = 240
MAX_CONCURRENCY = 2
DELAY_S = 0.04  # about 5 s for a whole run: time to look at it and stop it


@pytest.fixture(scope="module")
def service() -> Iterator[CountingService]:
    with counting_service(delay_s=DELAY_S) as running:
        yield running


@pytest.fixture(scope="module")
def contract(service: CountingService, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_contract(tmp_path_factory.mktemp("states"), service.url, CASES,
                          MAX_CONCURRENCY)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_run_is_interrupted_and_says_how_to_resume(
    signum: int, service: CountingService, contract: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    process = start_decflow("test", str(contract), "--store", str(store), cwd=tmp_path)
    wait_for(service, 20, process)
    run_id = only_run(store)
    status, notes = listed(store, run_id)
    assert status == "running"
    assert notes == [notes[0]] and f"held by pid {process.pid} on host" in notes[0]

    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    resume = f"decflow test {contract} --store {store} --resume {run_id}"
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 128 + signum
        assert err.decode().strip().splitlines()[-1] == (
            f"error: interrupted; run {run_id} is resumable: {resume}")
    status, notes = listed(store, run_id)
    assert status == "interrupted"
    assert notes == [f"{run_id} interrupted: resume it: {resume}"]
    code, out, err = run_cli("report", run_id, "--store", str(store))
    assert (code, out) == (2, "")
    assert err == (f"error: run {run_id} has no report: it was interrupted; resume it: "
                   f"{resume}\n")


def test_a_second_resume_is_refused_and_sends_nothing(
    service: CountingService, contract: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    first = start_decflow("test", str(contract), "--store", str(store), cwd=tmp_path)
    wait_for(service, 20, first)
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) == 130
    run_id = only_run(store)
    before, _ = service.snapshot()

    resumed = start_decflow("test", str(contract), "--store", str(store), "--resume", run_id,
                            cwd=tmp_path)
    wait_for(service, 10, resumed)
    second = start_decflow("test", str(contract), "--store", str(store), "--resume", run_id,
                           cwd=tmp_path)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 2
    (line,) = err.decode().strip().splitlines()
    assert line.startswith(f"error: run {run_id} is held by pid {resumed.pid} on host ")
    assert f"(lock {store}/runs/{run_id}/lock)" in line
    assert resumed.wait(timeout=120) == 0, resumed.communicate()[1].decode()

    after, _ = service.snapshot()
    sent = after - before
    # the resumed run sent each unrecorded request once; the refused one sent nothing
    assert set(sent.values()) == {1}
    assert listed(store, run_id) == ("pass", [])


def test_exit_2_leaves_a_failed_run_with_its_error_line(tmp_path: Path) -> None:
    """A run that fails once its backend answered is kept `failed`, resumable (one that
    fails before any answer is not kept: tests/integration/test_attacks_store_views.py)."""
    store = tmp_path / "store"
    with counting_service(delay_s=0.0) as service:
        contract = write_contract(tmp_path, service.url, 20, MAX_CONCURRENCY)
        code, _, err = run_cli("test", str(contract), "--store", str(store))
        assert code == 0, err
        run_id = only_run(store)
        (store / "runs" / run_id / "report.json").unlink()
        # the run as stopped in its summary stage, its answers stored; its dataset then
        # moved, so finishing it stops with an error
        record = json.loads((store / "runs" / run_id / "run.json").read_text())
        record["stages"].pop("summary")
        record.update(status="running", files={})
        (store / "runs" / run_id / "run.json").write_text(json.dumps(record))
        (tmp_path / "cases.jsonl").rename(tmp_path / "cases-moved.jsonl")
        process = start_decflow("test", str(contract), "--store", str(store), "--resume",
                                run_id, cwd=tmp_path)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    line = stderr.decode().strip().splitlines()[-1]
    resume = f"decflow test {contract} --store {store} --resume {run_id}"
    assert line.startswith(f"error: run {run_id} failed: ") and line.endswith(
        f"; fix that, then finish the run with `{resume}`")
    error = line[len(f"error: run {run_id} failed: "):line.index("; fix that")]
    assert listed(store, run_id) == ("failed", [f"{run_id} failed: {error}"])
    code, _, err = run_cli("report", run_id, "--store", str(store))
    assert code == 2 and err == (f"error: run {run_id} has no report: it failed: {error}; "
                                 f"fix that, then finish it with `{resume}`\n")


@pytest.mark.parametrize(("requirements", "status"), [
    ({"min_accuracy": 0.9}, "pass"),
    ({"max_ece": 0.1}, "fail"),  # confidence 0.8 on answers that are all right: ECE 0.2
])
def test_a_finished_run_shows_its_verdict(
    requirements: dict[str, float], status: str, service: CountingService, tmp_path: Path
) -> None:
    contract = write_contract(tmp_path, service.url, 20, MAX_CONCURRENCY, requirements)
    store = tmp_path / "store"
    code = run_cli("test", str(contract), "--store", str(store))[0]
    assert code == (0 if status == "pass" else 1)
    assert listed(store, only_run(store)) == (status, [])


# As polars does when Ctrl-C reaches it inside a query: it raises its own KeyboardInterrupt,
# and Python's handler for that same signal runs at the next bytecode boundary, which is
# the entry of the run's cleanup (`RunBook.__exit__`).
CTRL_C_IN_POLARS = """
import signal, sys
from decflow import cli
from decflow.store import store

def interrupted(frame):
    raise KeyboardInterrupt

def handler_runs_late(frame, event, arg):
    if event == "call" and frame.f_code.co_qualname == "RunBook.__exit__":
        sys.settrace(None)
        signal.raise_signal(signal.SIGINT)

store._frame_bytes = interrupted
sys.settrace(handler_runs_late)
sys.argv = ["decflow", *sys.argv[1:]]
cli.main()
"""


def test_ctrl_c_caught_by_a_library_still_names_the_run(tmp_path: Path) -> None:
    import os
    import sys

    from tests.support.paths import ROOT

    store = tmp_path / "store"
    contract = ROOT / "contracts" / "refund" / "decflow.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    done = subprocess.run([sys.executable, "-c", CTRL_C_IN_POLARS, "test", str(contract),
                           "--store", str(store)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    run_id = only_run(store)
    resume = f"decflow test {contract} --store {store} --resume {run_id}"
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: interrupted; run {run_id} is resumable: {resume}"]
    assert listed(store, run_id) == ("interrupted", [f"{run_id} interrupted: resume it: {resume}"])
    assert not (store / "runs" / run_id / "lock").exists()  # the run was closed, not abandoned
