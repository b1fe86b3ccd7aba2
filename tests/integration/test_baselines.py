"""Accepted baselines are immutable and trustworthy: accepting a run that did not PASS
takes `--force` and says what failed; `--resume` / `--from-stage` on a finished (or
accepted) run write a new run naming its parent and leave every file of the old one as it
was; two `runs accept` at once leave one consistent entry, the later naming the run it
replaced."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from decflow.store.locks import Lock
from decflow.store.store import Store
from tests.support.cli import run_cli
from tests.support.paths import ROOT

REFUND = ROOT / "contracts" / "refund"


def run(*args: str) -> str:
    """A finished run of the refund contract (mock backend); its id."""
    out = Path(args[-1])
    code, _, err = run_cli(*args[:-1], "-o", str(out))
    assert code in (0, 1), err
    run_id: str = json.loads(out.read_text())["run"]["id"]
    return run_id


def record(store: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((store / "runs" / run_id / "run.json").read_text()))


def files_of(store: Path, run_id: str) -> dict[str, bytes]:
    """Every file of a run: its folder, and the stage artifacts its record names."""
    found = {str(p.relative_to(store)): p.read_bytes()
             for p in (store / "runs" / run_id).rglob("*") if p.is_file()}
    for manifest in record(store, run_id)["stages"].values():
        folder = store / "stages" / manifest["stage"] / manifest["key"]
        found.update({str(p.relative_to(store)): p.read_bytes()
                      for p in folder.rglob("*") if p.is_file()})
    return found


def test_accepting_a_run_that_did_not_pass_needs_force(tmp_path: Path) -> None:
    store = tmp_path / "store"
    failing = run("fuzz", str(REFUND / "decflow.yaml"), "-b", "order_sensitive", "--store",
                  str(store), str(tmp_path / "f.json"))
    headline = json.loads((tmp_path / "f.json").read_text())["headline"]
    assert headline.startswith("FAIL ")
    code, out, err = run_cli("runs", "accept", failing, "--store", str(store))
    assert (code, out) == (2, "")
    assert err == (f"error: run {failing} is FAIL, not PASS: {headline}; accept it anyway "
                   f"with `decflow runs accept {failing} --force`\n")
    assert not (store / "accepted").exists()
    code, out, _ = run_cli("runs", "accept", failing, "--force", "--store", str(store))
    assert code == 0
    assert out == (f"accepted {failing} (FAIL) as the baseline for refund_request "
                   "(backend order_sensitive)\n")
    entry = json.loads((store / "accepted" / "refund_request" / "order_sensitive.json")
                       .read_text())
    assert (entry["run_id"], entry["status"], entry["forced"]) == (failing, "fail", True)


def test_an_accepted_baseline_never_changes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    contract = tmp_path / "refund" / "decflow.yaml"
    shutil.copytree(REFUND, contract.parent)
    accepted = run("test", "--all", str(contract), "--store", str(store),
                   str(tmp_path / "a.json"))
    assert run_cli("runs", "accept", accepted, "--store", str(store))[0] == 0
    before = files_of(store, accepted)

    children = []
    for more in (["--from-stage", "results"], ["--from-stage", "comparisons"], []):
        out = tmp_path / "child.json"
        code, _, err = run_cli("test", "--all", str(contract), "--store", str(store),
                               "--resume", accepted, *more, "-o", str(out))
        assert code == 0, err
        child = json.loads(out.read_text())["run"]["id"]
        assert child != accepted and record(store, child)["parent"] == accepted
        assert f"run {accepted} finished; this is a new run {child} that continues it" in err
        children.append(child)
    assert files_of(store, accepted) == before  # byte for byte
    assert record(store, accepted)["status"] == "pass"
    entry = json.loads((store / "accepted" / "refund_request" / "default.json").read_text())
    assert entry["run_id"] == accepted
    # the child that recomputed from `results` called the backend anew; the others reused
    # the accepted run's results
    results = [record(store, c)["stages"]["results"]["key"] for c in children]
    parent_results = record(store, accepted)["stages"]["results"]["key"]
    assert results[0] != parent_results and results[1:] == [parent_results] * 2


def _accept(store: Path, run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "decflow", "runs", "accept", run_id,
                             "--store", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_accepts_at_once_leave_one_consistent_entry(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = run("test", str(REFUND / "decflow.yaml"), "--store", str(store),
                str(tmp_path / "1.json"))
    second = run("test", str(REFUND / "decflow.yaml"), "--store", str(store),
                 str(tmp_path / "2.json"))
    # an accept that holds the lock makes the others wait, then they replace it in turn
    holder = Lock(Store(str(store)), "accepted/refund_request", "test")
    holder.acquire()
    waiting = [_accept(store, first), _accept(store, second)]
    time.sleep(1.5)
    assert [p.poll() for p in waiting] == [None, None]  # both wait for the lock
    threading.Timer(0.2, holder.release).start()
    outputs = [p.communicate(timeout=60) for p in waiting]
    assert [p.returncode for p in waiting] == [0, 0], outputs
    said = [out.strip() for out, _ in outputs]
    entry = json.loads((store / "accepted" / "refund_request" / "default.json").read_text())
    last = entry["run_id"]
    earlier = second if last == first else first
    assert entry["replaces"] == earlier
    assert sorted(said) == sorted([
        f"accepted {earlier} (PASS) as the baseline for refund_request (backend default)",
        f"accepted {last} (PASS) as the baseline for refund_request (backend default); it "
        f"replaces {earlier}"])
