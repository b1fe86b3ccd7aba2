"""A production check is a run like a contract run: `running` while a process works on it
(a second `check --resume` of it is refused, naming the holder), `interrupted` after
SIGINT, SIGTERM and SIGKILL (with the command that finishes it, which then does),
`failed` with its error line after exit 2, its verdict once finished.

The check runs as a process of its own whose summary stage waits for the test (the
`summarize` step patched to wait for a file), so the test sees it mid-run and stops it
there; a check of the example records takes a second otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli, start_decflow
from tests.support.paths import ROOT
from tests.support.run_states import listed, only_run

REFUND = ROOT / "contracts" / "refund"

# The check's summary waits until the test creates the file `$DECFLOW_TEST_GO` (at most a
# minute), after saying it is there by creating `$DECFLOW_TEST_AT`.
WAITING_SUMMARY = """
import os, sys, time
from pathlib import Path
from decflow import cli
from decflow.pipeline.production import summary

judge = summary.summarize

def waiting(*args, **kwargs):
    Path(os.environ["DECFLOW_TEST_AT"]).touch()
    deadline = time.monotonic() + 60
    while not Path(os.environ["DECFLOW_TEST_GO"]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return judge(*args, **kwargs)

summary.summarize = waiting
sys.argv = ["decflow", *sys.argv[1:]]
cli.main()
"""


def start_waiting_check(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    env |= {"DECFLOW_TEST_AT": str(tmp_path / "at"), "DECFLOW_TEST_GO": str(tmp_path / "go")}
    return subprocess.Popen([sys.executable, "-c", WAITING_SUMMARY, "check", *args],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def in_summary(tmp_path: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not (tmp_path / "at").exists():
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def check_args(store: Path) -> tuple[str, ...]:
    return (str(REFUND / "decflow.yaml"), "-d", str(REFUND / "production.jsonl"),
            "--baseline", str(REFUND / "production-baseline.jsonl"), "--store", str(store))


def resume_command(store: Path, run_id: str) -> str:
    return f"decflow check {REFUND / 'decflow.yaml'} --store {store} --resume {run_id}"


def test_a_check_is_running_while_it_runs_and_a_second_process_is_refused(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    process = start_waiting_check(tmp_path, *check_args(store))
    in_summary(tmp_path, process)
    run_id = only_run(store)
    status, notes = listed(store, run_id)
    assert status == "running"
    assert notes == [notes[0]] and f"held by pid {process.pid} on host" in notes[0]
    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    assert (record["kind"], record["status"], list(record["stages"])) == (
        "check", "running", ["aggregates"])

    second = start_decflow("check", str(REFUND / "decflow.yaml"), "--store", str(store),
                           "--resume", run_id, cwd=tmp_path)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 2
    (line,) = err.decode().strip().splitlines()
    assert line.startswith(f"error: run {run_id} is held by pid {process.pid} on host ")

    (tmp_path / "go").touch()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert listed(store, run_id) == ("pass", [])
    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    assert (record["status"], record["exit_code"]) == ("pass", 0)
    assert list(record["stages"]) == list(record["timings_s"]) == ["aggregates", "summary"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_check_is_interrupted_and_its_resume_finishes_it(
    signum: int, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    process = start_waiting_check(tmp_path, *check_args(store))
    in_summary(tmp_path, process)
    run_id = only_run(store)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    resume = resume_command(store, run_id)
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 128 + signum
        assert err.decode().strip().splitlines()[-1] == (
            f"error: interrupted; run {run_id} is resumable: {resume}")
    assert listed(store, run_id) == ("interrupted", [f"{run_id} interrupted: resume it: {resume}"])
    code, out, err = run_cli("report", run_id, "--store", str(store))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: run {run_id} has no report: it was interrupted")

    code, _, err = run_cli(*resume.split()[1:], "-f", "json")
    assert code == 0, err
    assert listed(store, run_id) == ("pass", [])
    stored = json.loads((store / "runs" / run_id / "report.json").read_text())
    assert stored["run"]["id"] == run_id and stored["baseline"]["source"] == "dataset"


def test_exit_2_leaves_a_failed_check_with_its_error_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    bad = tmp_path / "baseline.jsonl"
    bad.write_text('{"id": "b1", "decision": "refund_request"\n')
    code, _, err = run_cli("check", str(REFUND / "decflow.yaml"), "-d",
                           str(REFUND / "production.jsonl"), "--baseline", str(bad),
                           "--store", str(store))
    run_id = only_run(store)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: run {run_id} failed: {bad}: line 1")
    assert line.endswith(f"; fix that, then finish the run with `{resume_command(store, run_id)}`")
    status, notes = listed(store, run_id)
    error = line.removeprefix(f"error: run {run_id} failed: ").split("; fix that")[0]
    assert (status, notes) == ("failed", [f"{run_id} failed: {error}"])
