"""Stores written by earlier releases keep working: their runs list, show, re-gate, and can
be accepted and diffed (the fixture store was written by decflow before the stage, store
and report modules were restructured)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.paths import FIXTURES

OLD_RUN = FIXTURES / "old-run-decflow1"
OLD_RUN_ID = "20261201-193155-c7bc19"


def old_store(tmp_path: Path) -> str:
    shutil.copytree(OLD_RUN, tmp_path / "old")
    return str(tmp_path / "old" / "store")


def test_an_old_store_lists_and_shows_its_runs(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    code, text, err = run_cli("runs", "--store", store)
    assert code == 0, err
    (line,) = [row for row in text.splitlines() if OLD_RUN_ID in row]
    assert "loan_precheck" in line and "fail" in line
    code, text, err = run_cli("runs", "show", OLD_RUN_ID, "--store", store)
    assert code == 0, err
    record = json.loads(text)
    assert record["run_id"] == OLD_RUN_ID and record["status"] == "fail"
    assert {"cases", "requests", "results", "summary"} <= set(record["stages"])


def test_an_old_run_is_accepted_and_diffed_against_a_new_one(tmp_path: Path) -> None:
    store = old_store(tmp_path)
    contract = str(tmp_path / "old" / "decflow.yaml")
    # the old run is FAIL: accepting it takes --force
    assert run_cli("runs", "accept", OLD_RUN_ID, "--force", "--store", store)[0] == 0
    out = tmp_path / "new.json"
    code, _, err = run_cli("test", contract, "--store", store, "-o", str(out))
    assert out.exists(), err
    new_id = json.loads(out.read_text())["run"]["id"]
    diff_out = tmp_path / "diff.json"
    code, _, err = run_cli("diff", "accepted", new_id, "--store", store, "-o", str(diff_out))
    diff = json.loads(diff_out.read_text())
    assert code == diff["exit_code"] == 0, err
    assert diff["baseline"]["path"].endswith(OLD_RUN_ID)
    # the same mock on the same cases: nothing moved
    assert diff["counts"]["answer_flips"] == 0


def test_every_stored_run_ends_with_where_it_went(tmp_path: Path) -> None:
    from tests.support.paths import ROOT

    store = tmp_path / "store"
    code, out, err = run_cli("test", str(ROOT / "contracts" / "refund" / "decflow.yaml"),
                             "--store", str(store), "-f", "json")
    report = json.loads(out)  # stdout stays JSON
    run_id = report["run"]["id"]
    last = err.strip().splitlines()[-1]
    assert last == (f"run {run_id} stored: {store}/runs/{run_id}/report.json (HTML report: "
                    f"{store}/runs/{run_id}/report.html)")
    assert (store / "runs" / run_id / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((store / "runs" / run_id / "report.json").read_text())["run"]["id"] == \
        run_id
    assert code == 0


def test_runs_lists_with_a_header_and_marks_the_accepted_run(tmp_path: Path) -> None:
    store = tmp_path / "empty"
    assert run_cli("runs", "--store", str(store))[1].strip() == f"no runs in the store {store}"
    store = old_store(tmp_path)
    assert run_cli("runs", "accept", OLD_RUN_ID, "--force", "--store", store)[0] == 0
    code, text, _ = run_cli("runs", "--store", store)
    header, row = text.splitlines()
    assert code == 0
    assert header.split() == ["run", "accepted", "decision", "mode", "backend", "status",
                              "updated", "(UTC)"]
    assert row.split()[:3] == [OLD_RUN_ID, "*", "loan_precheck"]
