"""Reports that cannot lie (issue 21, class 6): run.json records the sha256 of report.json
and report.html; a stored report edited afterwards — a FAIL turned into a PASS, one digit
flipped — stops every reader (`report`, `report -c` re-gate, `diff`, `replay`, the SDK)
with exit 2 naming the file, and `decflow runs` lists the run as damaged and the others
as they are. A copy of a report outside the store must still carry the verdict its run
recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

import decflow
from decflow.errors import DecflowError
from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """(store, contract, a failing test --all run, a second run of the same contract):
    only a property gate fails, which a report's own numbers cannot recompute."""
    contract = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    contract["requirements"]["max_ece"] = 0.5
    shutil.copy(EXAMPLES / "refund" / "cases.jsonl", tmp_path / "cases.jsonl")
    path = tmp_path / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract))
    store = tmp_path / "store"
    ids = []
    for _ in range(2):
        code, out, err = run_cli("test", "--all", str(path), "--store", str(store), "-f", "json",
                                 "-b", "order_sensitive")  # option_order fails
        assert code == 1, err
        ids.append(json.loads(out)["run"]["id"])
    return store, path, ids[0], ids[1]


def edited_to_pass(report_file: Path) -> None:
    report = json.loads(report_file.read_text())
    report["status"], report["exit_code"] = "pass", 0
    for check in report["checks"]:
        check["status"] = "pass"
    report_file.write_text(json.dumps(report))


def flip_one_digit(report_file: Path) -> None:
    text = report_file.read_text()
    at = text.index('"latency_ms":') + len('"latency_ms":')
    digit = next(i for i in range(at, len(text)) if text[i].isdigit())
    report_file.write_text(text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:])


@pytest.mark.parametrize("edit", [edited_to_pass, flip_one_digit])
def test_an_edited_stored_report_stops_every_reader(
    runs: tuple[Path, Path, str, str], edit: object
) -> None:
    store, contract, run_id, other = runs
    record = json.loads((store / "runs" / run_id / "run.json").read_text())
    report_file = store / "runs" / run_id / "report.json"
    html_file = store / "runs" / run_id / "report.html"
    assert record["files"] == {
        "report.json": "sha256:" + hashlib.sha256(report_file.read_bytes()).hexdigest(),
        "report.html": "sha256:" + hashlib.sha256(html_file.read_bytes()).hexdigest(),
    }
    edit(report_file)  # type: ignore[operator]
    readers = [
        ["report", run_id], ["report", str(report_file)], ["report", run_id, "-f", "json"],
        ["report", run_id, "-c", str(contract)], ["diff", other, run_id],
        ["diff", run_id, other], ["replay", run_id],
    ]
    for reader in readers:
        code, out, err = run_cli(*reader, "--store", str(store))
        assert code == 2, (reader, out, err)
        assert f"runs/{run_id}/report.json" in err and "sha256" in err, (reader, err)
        assert "PASS" not in out
    with pytest.raises(DecflowError, match="does not match the sha256"):
        decflow.run_diff(other, run_id, store=str(store))
    code, listing, err = run_cli("runs", "--store", str(store))
    assert code == 2  # the store holds a damaged run: said, and every run still listed
    lines = {line.split()[0]: line for line in listing.splitlines()[1:]}
    assert " damaged " in lines[run_id] and " fail " in lines[other]
    assert f"error: run {run_id}: report.json no longer match" in err
    code, out, _err = run_cli("runs", "verify", run_id, "--store", str(store))
    assert code == 2 and "report.json" in out + _err


def test_a_copy_of_a_report_must_carry_the_verdict_its_run_recorded(
    runs: tuple[Path, Path, str, str], tmp_path: Path
) -> None:
    store, _contract, run_id, _other = runs
    copy = tmp_path / "copy.json"
    code, _out, err = run_cli("report", run_id, "--store", str(store), "-o", str(copy))
    assert code == 1, err
    assert run_cli("report", str(copy), "--store", str(store))[0] == 1
    edited_to_pass(copy)
    code, _out, err = run_cli("report", str(copy), "--store", str(store))
    assert code == 2 and str(copy) in err and "the report was edited after the run" in err, err


def test_a_view_file_edited_marks_the_run_damaged(runs: tuple[Path, Path, str, str]) -> None:
    store, _contract, run_id, _other = runs
    html = store / "runs" / run_id / "report.html"
    html.write_text(html.read_text().replace("FAIL", "PASS"))
    code, listing, err = run_cli("runs", "--store", str(store))
    assert code == 2 and " damaged " in listing
    assert "report.html no longer matches the sha256 in its run.json" in err
    assert "; it is not read" in err
