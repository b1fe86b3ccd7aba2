"""`decflow runs verify` names every damaged artifact of a run; `decflow runs gc` removes old
runs and the stage artifacts only they used, never an accepted run, a running one or a part
another run uses."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from decflow.store.locks import Lock
from decflow.store.runs import run_path
from decflow.store.store import Store
from tests.support.cli import run_cli
from tests.support.paths import ROOT

CONTRACT = str(ROOT / "contracts" / "refund" / "decflow.yaml")


def runs(store: Path, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        out = store.parent / "out.json"
        code, _, err = run_cli("test", "--all", CONTRACT, "--store", str(store), "-o", str(out))
        assert code == 0, err
        ids.append(json.loads(out.read_text())["run"]["id"])
    return ids


def record(store: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((store / "runs" / run_id / "run.json").read_text()))


def stage_folders(store: Path, run_id: str) -> set[Path]:
    return {store / "stages" / m["stage"] / m["key"]
            for m in record(store, run_id)["stages"].values()}


def test_verify_names_every_damaged_artifact(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first, second = sorted(runs(store, 2))  # verify lists runs by id (same second: by suffix)
    code, out, err = run_cli("runs", "verify", "--store", str(store))
    assert code == 0 and err == ""
    # listed by run id: two runs of the same second are ordered by the rest of their ids
    assert [line.split()[:2] for line in out.splitlines()] == [
        [run_id, "ok"] for run_id in sorted((first, second))]

    part = store / record(store, first)["stages"]["results"]["parts"][0]["path"]
    data = bytearray(part.read_bytes())
    data[-10] ^= 1
    part.write_bytes(bytes(data))
    shared = store / record(store, first)["stages"]["cases"]["parts"][0]["path"]
    shared.unlink()  # the cases stage both runs use
    code, out, err = run_cli("runs", "verify", "--store", str(store))
    assert code == 2
    assert f"{first} damaged:\n" in out and f"{second} damaged:\n" in out
    assert f"  {part} does not match its manifest (sha256 differs)" in out
    assert f"  {shared} does not exist" in out
    assert out.count("does not exist") == 2  # named for each run that uses it
    assert err.startswith("error: 2 of 2 runs are damaged")
    code, out, _ = run_cli("runs", "verify", second, "--store", str(store))
    assert code == 2 and part.name not in out


def test_gc_keeps_accepted_running_and_shared(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = runs(store, 5)  # in the order made, newest last (runs made within one second
    # too: gc orders them by the nanosecond, not by their ids' random suffix)
    assert run_cli("runs", "accept", ids[0], "--store", str(store))[0] == 0
    held = Lock(Store(str(store)), run_path(ids[1]), "run")  # as a process working on it
    held.acquire()
    record_1 = record(store, ids[1])
    (store / "runs" / ids[1] / "run.json").write_text(json.dumps({**record_1,
                                                                  "status": "running"}))
    shared = stage_folders(store, ids[0]) & stage_folders(store, ids[2])
    only_2 = stage_folders(store, ids[2]) - set().union(
        *(stage_folders(store, r) for r in ids if r != ids[2]))
    assert shared and only_2

    named = sorted(str(folder.relative_to(store)) for folder in only_2)
    code, out, _ = run_cli("runs", "gc", "--keep", "2", "--dry-run", "--store", str(store))
    assert code == 0 and out.splitlines() == [
        f"would remove run {ids[2]}", *(f"would remove stage artifact {f}" for f in named),
        f"would remove 1 run and {len(only_2)} stage artifacts; kept 4 runs"]
    assert (store / "runs" / ids[2]).exists()
    assert run_cli("runs", "gc", "--older-than", "30d", "--store", str(store))[1] == (
        "removed 0 runs and 0 stage artifacts; kept 5 runs\n")
    code, out, _ = run_cli("runs", "gc", "--keep", "2", "--store", str(store))
    held.release()
    assert code == 0 and out.splitlines() == [
        f"removed run {ids[2]}", *(f"removed stage artifact {f}" for f in named),
        f"removed 1 run and {len(only_2)} stage artifacts; kept 4 runs"]
    assert not (store / "runs" / ids[2]).exists()
    assert all(folder.exists() for folder in shared)
    assert not any(folder.exists() for folder in only_2)
    remaining = [ids[0], ids[1], ids[3], ids[4]]
    code, out, _ = run_cli("runs", "verify", "--store", str(store))
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == sorted(remaining)
    code, _, err = run_cli("report", ids[2], "--store", str(store))
    assert code == 2 and f"'{ids[2]}' is neither a file or folder nor a run id" in err
    assert run_cli("runs", "gc", "--store", str(store))[2] == (
        "error: runs gc: say what to remove: --keep N and/or --older-than AGE\n")


def test_gc_keeps_the_runs_a_kept_run_names(tmp_path: Path) -> None:
    store = tmp_path / "store"
    older, candidate = runs(store, 2)
    out = tmp_path / "diff.json"
    code, _, err = run_cli("diff", older, candidate, "--noise-reruns", "2", "--store",
                           str(store), "-o", str(out))
    assert code in (0, 1), err
    (child,) = [p.name for p in (store / "runs").iterdir() if p.name not in (older, candidate)]
    assert record(store, child)["noise_of"] == candidate
    # --keep 1 keeps the newest run, the noise child; the run it measures stays with a note
    code, text, err = run_cli("runs", "gc", "--keep", "1", "--store", str(store))
    assert code == 0, err
    assert text.splitlines()[0] == f"removed run {older}"
    assert text.splitlines()[-1].startswith("removed 1 run and ")
    assert text.splitlines()[-1].endswith("; kept 2 runs")
    assert err == f"note: kept run {candidate}: run {child} measures its noise\n"
    # the child's contract copy lives in its parent's folder: still there, still shown
    assert Path(record(store, child)["spec"]["contract_path"]).exists()
    assert run_cli("report", child, "--store", str(store))[0] in (0, 1)
    assert run_cli("runs", "verify", "--store", str(store))[0] == 0


def test_gc_removes_the_calls_an_interrupted_run_left(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = runs(store, 2)
    # as a run killed in its call stage records itself: running, its calls' folder named
    calls = store / "stages" / "results" / ("f" * 64)
    calls.mkdir(parents=True)
    (calls / "chunk-o000000-1-00000.parquet").write_bytes(b"results so far")
    interrupted = {**record(store, ids[0]), "status": "running",
                   "computing": {"stage": "results", "key": "f" * 64}}
    (store / "runs" / ids[0] / "run.json").write_text(json.dumps(interrupted))
    # its row in the table (a line after the table says how to resume it)
    row = next(row for row in run_cli("runs", "--store", str(store))[1].splitlines()
               if row.startswith(ids[0]))
    assert row.split()[-2] == "interrupted"
    code, out, _ = run_cli("runs", "gc", "--keep", "1", "--store", str(store))
    assert code == 0 and out.splitlines()[0] == f"removed run {ids[0]}"
    assert not calls.exists()
    assert run_cli("runs", "verify", "--store", str(store))[0] == 0


def _undeletable(folder: Path) -> Callable[[], None]:
    """Entries of `folder` cannot be removed or renamed (root: `chattr +i`, as root writes
    through permissions); returns the undo."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    try:
        subprocess.run(["chattr", "+i", str(folder)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("running as root where chattr cannot make a folder immutable")
    return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True) and None


def test_gc_cut_short_leaves_each_run_whole(tmp_path: Path) -> None:
    store = tmp_path / "store"
    made = runs(store, 3)
    ids = sorted(made)  # as `runs` and `runs verify` list them
    undo = _undeletable(store / "runs")
    try:
        code, _, err = run_cli("runs", "gc", "--keep", "1", "--store", str(store))
    finally:
        undo()
    assert code == 2
    (line,) = err.splitlines()
    # the first of the two older runs it tried to remove
    assert line.startswith(f"error: runs gc: cannot remove {store}/runs/{min(made[:2])} (")
    # the run it could not remove is whole: listed, verified, shown
    code, out, err = run_cli("runs", "--store", str(store))
    assert code == 0, err
    assert [row.split()[0] for row in out.splitlines()[1:]] == ids
    code, out, err = run_cli("runs", "verify", "--store", str(store))
    assert code == 0 and [row.split()[:2] for row in out.splitlines()] == [
        [run_id, "ok"] for run_id in ids], out + err
    assert run_cli("report", ids[0], "--store", str(store))[0] == 0


def test_a_run_folder_without_its_record_is_named_and_collected(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (kept,) = runs(store, 1)
    # what a run stopped between its contract copy and its first record leaves
    left = store / "runs" / "20260101-000000-abcdef"
    left.mkdir()
    (left / "contract.yaml").write_text("schema_version: '0.1'\n")
    code, out, err = run_cli("runs", "--store", str(store))
    assert code == 2
    assert out.splitlines()[2].split() == [left.name, "damaged"]
    assert err == (f"error: store: {left}/run.json does not exist: the run stopped before "
                   "it was recorded, or its record was deleted; `decflow runs gc` removes "
                   f"what is left of it (the folder {left})\n")
    code, out, err = run_cli("runs", "verify", "--store", str(store))
    assert code == 2
    assert out.splitlines()[:2] == [f"{left.name} damaged:",
                                    f"  {left}/run.json does not exist: the run stopped before "
                                    "it was recorded, or its record was deleted"]
    assert out.splitlines()[2].startswith(f"{kept} ok (") and len(out.splitlines()) == 3
    assert err.startswith("error: 1 of 2 runs are damaged")
    code, out, _ = run_cli("runs", "gc", "--keep", "5", "--store", str(store))
    assert code == 0 and out.splitlines() == [
        f"removed run {left.name}", "removed 1 run and 0 stage artifacts; kept 1 run"]
    assert not left.exists()
    assert run_cli("runs", "verify", "--store", str(store))[0] == 0


def test_a_run_held_before_its_first_record_is_not_named(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (kept,) = runs(store, 1)
    starting = Lock(Store(str(store)), run_path("20260101-000000-abcdef"), "run")
    starting.acquire()  # a run being set up: its lock and contract copy, no record yet
    (store / "runs" / "20260101-000000-abcdef" / "contract.yaml").write_text("x: 1\n")
    try:
        code, out, err = run_cli("runs", "--store", str(store))
        assert (code, err) == (0, "") and len(out.splitlines()) == 2
        code, out, _ = run_cli("runs", "verify", "--store", str(store))
        assert code == 0 and out.startswith(f"{kept} ok (") and len(out.splitlines()) == 1
        assert run_cli("runs", "gc", "--keep", "0", "--dry-run", "--store", str(store))[1] \
            .splitlines()[0] == f"would remove run {kept}"
    finally:
        starting.release()


def test_a_full_disk_at_the_first_record_leaves_no_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decflow.store import store as store_module

    store = tmp_path / "store"
    real = store_module._LocalFiles.open
    writes = []

    def full_after_the_contract_copy(self: Any, path: str, mode: str) -> Any:
        if "w" in mode and "/runs/" in path:
            writes.append(path)
            if len(writes) == 2:  # the contract copy went in; the record does not fit
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, path, mode)

    monkeypatch.setattr(store_module._LocalFiles, "open", full_after_the_contract_copy)
    code, _, err = run_cli("test", CONTRACT, "--store", str(store))
    monkeypatch.undo()
    assert code == 2 and "(No space left on device); free space" in err
    assert f"{store}/runs/" in err and "/run.json" in err
    assert list((store / "runs").iterdir()) == []
    assert run_cli("runs", "--store", str(store)) == (0, f"no runs in the store {store}\n", "")
