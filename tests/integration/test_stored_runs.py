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
    assert run_cli("runs", "accept", OLD_RUN_ID, "--store", store)[0] == 0
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
