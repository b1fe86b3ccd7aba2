"""A damaged or unusual store never crashes a command and never answers falsely.

Each row of the table breaks a store (or the place it should be) one way — a file where
the store should be, truncated or deleted files, a part whose bytes changed, a full disk, a
file-size limit, no permission — and runs commands through the CLI: each ends with exit 2
and one `error:` line naming the damaged path (no traceback, no `internal error`), or, for
a damaged *cached* stage, computes the stage again; no later command (cache hit, re-gate,
diff, resume) reads a damaged artifact, and no temporary file is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paths import ROOT

REFUND = ROOT / "contracts" / "refund"


@dataclass(frozen=True)
class Fault:
    name: str
    breaks: Callable[[Path, str], str]  # (store, a run id) → the damaged path (for messages)
    command: Callable[[Path, str, Path], list[str]]  # (store, run id, contract) → argv
    code: int
    error: str  # in the one error line, with {path} for the damaged path
    then: Callable[[Path, str, Path], None] | None = None  # what must hold afterwards


def stored_runs(tmp: Path, count: int = 2) -> tuple[Path, list[str], Path]:
    """A store with `count` finished refund runs; (store, run ids, contract copy)."""
    folder = tmp / "refund"
    shutil.copytree(REFUND, folder)
    contract = folder / "decflow.yaml"
    store = tmp / "store"
    ids = []
    for _ in range(count):
        out = tmp / "out.json"
        code, _, err = run_cli("test", str(contract), "--store", str(store), "-o", str(out))
        assert code == 0, err
        ids.append(json.loads(out.read_text())["run"]["id"])
    return store, ids, contract


def record(store: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((store / "runs" / run_id / "run.json").read_text()))


def stage_dir(store: Path, run_id: str, stage: str) -> Path:
    return store / "stages" / stage / record(store, run_id)["stages"][stage]["key"]


def truncate(path: Path) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return str(path)


def flip_byte(path: Path) -> str:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return str(path)


def first_part(store: Path, run_id: str, stage: str) -> Path:
    part = record(store, run_id)["stages"][stage]["parts"][0]["path"]
    return store / part


def a_file_instead(store: Path, _run: str) -> str:
    shutil.rmtree(store)
    store.write_text("not a store\n")
    return str(store)


def run_args(contract: Path, store: Path, *more: str) -> list[str]:
    return ["test", str(contract), "--store", str(store), *more]


def recomputed(stage: str) -> Callable[[Path, str, Path], None]:
    """The damaged cached stage was published again: intact, and later runs hit it."""

    def check(store: Path, run_id: str, contract: Path) -> None:
        code, _, err = run_cli(*run_args(contract, store))
        assert code == 0 and "cache hit" not in err and "damaged" not in err, err

    return check


def no_temporary_files(store: Path) -> None:
    assert not list(store.rglob(".tmp-*"))


FAULTS = [
    Fault("store path is a file", a_file_instead,
          lambda store, _r, _c: ["runs", "--store", str(store)], 2,
          "store: {path} is a file, not a folder; pass --store a folder"),
    Fault("store path is a file (a run)", a_file_instead,
          lambda store, _r, contract: run_args(contract, store), 2,
          "store: {path} is a file, not a folder; pass --store a folder"),
    Fault("store path is a file (a check)", a_file_instead,
          lambda store, _r, contract: ["check", str(contract), "-d",
                                       str(contract.parent / "production.jsonl"), "--store",
                                       str(store)], 2,
          "store: {path} is a file, not a folder; pass --store a folder"),
    Fault("store path under a file", lambda store, r: a_file_instead(store, r) + "/inner",
          lambda store, _r, _c: ["runs", "--store", f"{store}/inner"], 2,
          "store: cannot open the store {path} (Not a directory); a part of the store path "
          "is a file, not a folder"),
    Fault("truncated run.json, listed",
          lambda store, run: truncate(store / "runs" / run / "run.json"),
          lambda store, _r, _c: ["runs", "--store", str(store)], 2,
          "store: {path} is damaged: not valid JSON"),
    Fault("truncated run.json, report",
          lambda store, run: truncate(store / "runs" / run / "run.json"),
          lambda store, run, _c: ["runs", "show", run, "--store", str(store)], 2,
          "store: {path} is damaged: not valid JSON"),
    Fault("truncated run.json, resume",
          lambda store, run: truncate(store / "runs" / run / "run.json"),
          lambda store, run, contract: run_args(contract, store, "--resume", run), 2,
          "store: {path} is damaged: not valid JSON"),
    Fault("truncated report.json, report",
          lambda store, run: truncate(store / "runs" / run / "report.json"),
          lambda store, run, _c: ["report", run, "--store", str(store)], 2,
          "{path}"),
    Fault("truncated report.json, diff",
          lambda store, run: truncate(store / "runs" / run / "report.json"),
          lambda store, run, _c: ["diff", run, run, "--store", str(store)], 2,
          "{path}"),
    Fault("changed results part, re-gate",
          lambda store, run: flip_byte(first_part(store, run, "results")),
          lambda store, run, contract: ["report", run, "-c", str(contract), "--store",
                                        str(store)], 2,
          "store: {path} does not match its manifest (sha256 differs)"),
    Fault("deleted results part, re-gate",
          lambda store, run: (first_part(store, run, "results").unlink(),
                              str(first_part(store, run, "results")))[1],
          lambda store, run, contract: ["report", run, "-c", str(contract), "--store",
                                        str(store)], 2,
          "store: {path} does not exist"),
    Fault("changed results part, resume",
          lambda store, run: flip_byte(first_part(store, run, "results")),
          lambda store, run, contract: run_args(contract, store, "--resume", run), 2,
          "store: {path} does not match its manifest (sha256 differs)"),
    Fault("truncated cached manifest",
          lambda store, run: truncate(stage_dir(store, run, "cases") / "_manifest.json"),
          lambda store, _r, contract: run_args(contract, store), 0,
          "stage cases: the stored artifact is damaged ({path} is damaged: not valid JSON",
          recomputed("cases")),
    Fault("deleted cached part",
          lambda store, run: (first_part(store, run, "requests").unlink(),
                              str(first_part(store, run, "requests")))[1],
          lambda store, _r, contract: run_args(contract, store), 0,
          "stage requests: the stored artifact is damaged ({path} does not exist",
          recomputed("requests")),
    Fault("changed cached part",
          lambda store, run: flip_byte(first_part(store, run, "cases")),
          lambda store, _r, contract: run_args(contract, store), 0,
          "stage cases: the stored artifact is damaged ({path} does not match its manifest",
          recomputed("cases")),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_store_fault(fault: Fault, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, (run_id, _), contract = stored_runs(tmp_path)
    path = fault.breaks(store, run_id)
    code, _, err = run_cli(*fault.command(store, run_id, contract))
    assert code == fault.code, err
    assert "Traceback" not in err and "internal error" not in err
    expected = fault.error.format(path=path)
    if fault.code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and expected in errors[0], err
    else:  # a warning (on stderr, where the command line has no log handler of its own)
        assert expected in caplog.text
    if fault.then is not None:
        fault.then(store, run_id, contract)
    no_temporary_files(store)


def test_runs_lists_the_readable_runs_beside_a_damaged_one(tmp_path: Path) -> None:
    store, ids, _ = stored_runs(tmp_path, 3)
    damaged = truncate(store / "runs" / ids[1] / "run.json")
    code, text, err = run_cli("runs", "--store", str(store))
    assert code == 2
    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:]}
    assert rows[ids[0]][-2] == rows[ids[2]][-2] == "pass"
    assert rows[ids[1]][1:] == ["damaged"]
    assert err.startswith(f"error: store: {damaged} is damaged: not valid JSON")
    assert f"run it again for a new run (and remove this one with `decflow runs rm {ids[1]}`)" \
        in err


def test_no_runs_is_said_only_of_a_store_without_runs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    monkeypatch.setenv("DECFLOW_STORE", str(a_file))
    code, out, err = run_cli("runs")
    assert (code, out) == (2, "")
    assert err == (f"error: store: {a_file} is a file, not a folder; pass --store a folder "
                   "(or set DECFLOW_STORE)\n")
    monkeypatch.setenv("DECFLOW_STORE", str(tmp_path / "fresh"))
    assert run_cli("runs") == (0, f"no runs in the store {tmp_path / 'fresh'}\n", "")


class _FullDisk:
    """Writes into stages/results/ fail as on a full disk (ENOSPC)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real

    def __call__(self, path: str, mode: str) -> Any:
        if "w" in mode and "/stages/results/" in path:
            handle = self.real(path, mode)
            handle.close()  # the temporary file exists, as a real failed write leaves it
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(path, mode)


def test_a_full_disk_is_exit_2_naming_the_file_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decflow.store import store as store_module

    store, _, contract = stored_runs(tmp_path)
    monkeypatch.setattr(store_module._LocalFiles, "open",
                        lambda _self, path, mode: _FullDisk(open)(path, mode))
    code, _, err = run_cli(*run_args(contract, store))
    monkeypatch.undo()
    (line,) = err.strip().splitlines()[-1:]
    assert code == 2
    assert "(No space left on device); free space on that device" in line
    assert f"{store}/stages/results/" in line and line.startswith("error: run ")
    no_temporary_files(store)
    # the stopped run is listed as failed; the finished ones are intact
    code, text, _ = run_cli("runs", "--store", str(store))
    assert code == 0 and sorted(row.split()[-2] for row in text.splitlines()[1:4]) == [
        "failed", "pass", "pass"]


def _limited(limit: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_file_size_limit_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    store, _, contract = stored_runs(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "DECFLOW_STORE"}
    done = subprocess.run(
        [sys.executable, "-B", "-m", "decflow", *run_args(contract, store, "--all")],
        env=env, capture_output=True, text=True, preexec_fn=_limited(4096), check=False)
    assert done.returncode == 2, done.stderr
    (line,) = [row for row in done.stderr.splitlines() if row.startswith("error:")]
    assert "(File too large); the file-size limit (`ulimit -f`) is too small" in line
    assert f"{store}/" in line and "internal error" not in done.stderr
    no_temporary_files(store)


def _deny_writes(store: Path) -> Callable[[], None]:
    """Make every folder of the store unwritable for this process; returns the undo. Root
    writes through permissions, so for root the folders are made immutable (`chattr +i`)."""
    folders = [store, *(p for p in store.rglob("*") if p.is_dir())]
    if os.geteuid() != 0:
        for folder in folders:
            folder.chmod(0o555)
        return lambda: [folder.chmod(0o755) for folder in folders] and None
    try:
        subprocess.run(["chattr", "+i", *map(str, folders)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("running as root where chattr cannot make folders immutable")
    return lambda: subprocess.run(["chattr", "-i", *map(str, folders)], check=True) and None


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_a_store_without_write_permission_is_exit_2_naming_it(tmp_path: Path) -> None:
    store, _, contract = stored_runs(tmp_path)
    undo = _deny_writes(store)
    try:
        code, _, err = run_cli(*run_args(contract, store))
    finally:
        undo()
    assert code == 2, err
    (line,) = [row for row in err.splitlines() if row.startswith("error:")]
    assert ("(Permission denied); make it" in line or "(Operation not permitted); make it"
            in line), line
    assert "readable and writable for this user, or pass another --store" in line
    assert f"{store}/runs/" in line


def test_a_damaged_cached_check_unit_is_read_again(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "store"
    args = ["check", str(REFUND / "decflow.yaml"), "-d", str(REFUND / "production.jsonl"),
            "--store", str(store), "-f", "json"]
    code, first, _ = run_cli(*args)
    assert code == 0
    (part,) = store.glob("stages/records/*/part-00000.parquet")
    flip_byte(part)
    code, again, err = run_cli(*args)
    assert code == 0, err
    assert f"stage records: the stored artifact is damaged ({part} does not match" in \
        caplog.text
    assert json.loads(again)["metrics"] == json.loads(first)["metrics"]
    caplog.clear()  # published again: the next check uses it as it is
    assert run_cli(*args)[0] == 0 and "damaged" not in caplog.text
