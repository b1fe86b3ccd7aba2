"""A noise run (`diff --noise-reruns K`: the candidate's requests re-sent K times as child
run `<candidate>-noise<K>`) has the states of any run: `running` while the diff that makes
it works on it (a second diff is refused, naming the holder), `interrupted` after SIGINT,
SIGTERM and SIGKILL (with the diff that finishes it, which then does), `failed` with its
error line after exit 2.

Against the slow counting service (tests/support/servers/counting.py), each diff a process
of its own; the two runs it diffs are made once per module and copied for each test.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli, start_decflow
from tests.support.run_states import listed, wait_for
from tests.support.servers.counting import CountingService, counting_service, write_contract

CASES = 40
RERUNS = 3
DELAY_S = 0.04  # 120 re-sent calls two at a time: about 2.5 s to look at the noise run


@pytest.fixture(scope="module")
def service() -> Iterator[CountingService]:
    with counting_service(delay_s=DELAY_S) as running:
        yield running


@pytest.fixture(scope="module")
def made(service: CountingService,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, str]]:
    """A store with two finished runs of the counting contract (baseline, candidate)."""
    folder = tmp_path_factory.mktemp("noise-states")
    contract = write_contract(folder, service.url, CASES, 2)
    store = folder / "store"
    for _ in range(2):
        code, _, err = run_cli("test", str(contract), "--store", str(store))
        assert code == 0, err
    baseline, candidate = sorted(p.name for p in (store / "runs").iterdir())
    return store, (baseline, candidate)


@pytest.fixture
def runs(made: tuple[Path, tuple[str, str]], tmp_path: Path) -> tuple[Path, str, str]:
    store, (baseline, candidate) = made
    shutil.copytree(store, tmp_path / "store")
    return tmp_path / "store", baseline, candidate


def diff_args(store: Path, baseline: str, candidate: str) -> tuple[str, ...]:
    return ("diff", baseline, candidate, "--noise-reruns", str(RERUNS), "--store", str(store))


def resume(store: Path, candidate: str) -> str:
    return f"decflow diff BASELINE {candidate} --noise-reruns {RERUNS} --store {store}"


def test_a_noise_run_is_running_while_a_diff_makes_it_and_a_second_is_refused(
    service: CountingService, runs: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, baseline, candidate = runs
    child = f"{candidate}-noise{RERUNS}"
    service.delay_s = 1.0  # the first diff is still calling when the second one starts
    try:
        first = start_decflow(*diff_args(store, baseline, candidate), cwd=tmp_path)
        wait_for(service, 2, first)
        status, notes = listed(store, child)
        assert status == "running"
        assert notes == [notes[0]] and f"held by pid {first.pid} on host" in notes[0]

        second = start_decflow(*diff_args(store, baseline, candidate), cwd=tmp_path)
        _, err = second.communicate(timeout=60)
    finally:
        service.delay_s = DELAY_S
    assert second.returncode == 2, err.decode()
    (line,) = err.decode().strip().splitlines()
    assert line.startswith(f"error: run {child} is held by pid {first.pid} on host ")

    _, err = first.communicate(timeout=120)
    assert first.returncode in (0, 1), err.decode()
    status, notes = listed(store, child)
    assert status in ("pass", "warn") and notes == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_noise_run_is_interrupted_and_the_next_diff_finishes_it(
    signum: int, service: CountingService, runs: tuple[Path, str, str], tmp_path: Path
) -> None:
    store, baseline, candidate = runs
    child = f"{candidate}-noise{RERUNS}"
    process = start_decflow(*diff_args(store, baseline, candidate), cwd=tmp_path)
    wait_for(service, 10, process)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 128 + signum
        assert err.decode().strip().splitlines()[-1] == (
            f"error: interrupted; run {child} is resumable: {resume(store, candidate)}")
    assert listed(store, child) == (
        "interrupted", [f"{child} interrupted: resume it: {resume(store, candidate)}"])

    code, _, err = run_cli(*diff_args(store, baseline, candidate))
    assert code in (0, 1), err
    assert listed(store, child)[0] in ("pass", "warn")


def test_exit_2_leaves_a_failed_noise_run_with_its_error_line(
    service: CountingService, runs: tuple[Path, str, str]
) -> None:
    store, baseline, candidate = runs
    child = f"{candidate}-noise{RERUNS}"
    service.failing = True
    try:
        code, _, err = run_cli(*diff_args(store, baseline, candidate))
    finally:
        service.failing = False
    error = ("backend 'default' failed on every case; first error: backend_error: returned "
             "HTTP 500")
    assert code == 2
    assert err == (f"error: run {child} failed: {error}; fix that, then finish the run with "
                   f"`{resume(store, candidate)}`\n")
    assert listed(store, child) == ("failed", [f"{child} failed: {error}"])
