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


OLDER = FIXTURES / "old-runs-5743cca"
OLDER_CHECK, OLDER_RUN = "20261206-082840-f5f877", "20261206-082843-8ac6ee"


def test_runs_stored_before_a_change_of_planning_figures_show_and_regate(
        tmp_path: Path) -> None:
    shutil.copytree(OLDER, tmp_path / "old")
    store = str(tmp_path / "old" / "store")
    stored = json.loads((tmp_path / "old" / "store" / "runs" / OLDER_CHECK / "report.json")
                        .read_text())
    # the check run shows as it was stored, its older planning figures included
    code, shown, err = run_cli("report", OLDER_CHECK, "--store", store, "-f", "json")
    assert code == 0, err
    assert json.loads(shown)["checks"] == stored["checks"]
    (undecided,) = [c for c in stored["checks"] if c["status"] == "not_established"]
    assert "about 56 cases needed" in undecided["message"]
    # re-gated with its contract: the same verdicts, planned as decflow plans them today
    code, regated, err = run_cli("report", OLDER_CHECK, "-c",
                                 str(tmp_path / "old" / "decflow.yaml"), "--store", store,
                                 "-f", "json")
    assert code == 0, err
    report = json.loads(regated)
    assert [(c["gate"], c["status"]) for c in report["checks"]] == [
        (c["gate"], c["status"]) for c in stored["checks"]]
    assert report["status"] == stored["status"] == "warn"
    # the contract run of the same decflow: shown and re-gated with the contract it kept
    contract = str(tmp_path / "old" / "store" / "runs" / OLDER_RUN / "contract.yaml")
    for args in ((), ("-c", contract)):
        code, text, err = run_cli("report", OLDER_RUN, *args, "--store", store)
        assert code == 1, err
        assert text.startswith("FAIL 2/18: max_ece 0.1751 > 0.15; "
                               "option_order.max_violation_rate 0.8182 > 0")


def test_a_stored_check_report_whose_verdict_no_longer_follows_is_refused_usefully(
        tmp_path: Path) -> None:
    shutil.copytree(OLDER, tmp_path / "old")
    store = tmp_path / "old" / "store"
    report_file = store / "runs" / OLDER_CHECK / "report.json"
    report = json.loads(report_file.read_text())
    # a verdict edited in a copy of the report is refused, whatever its prose says
    report["segments"][0]["checks"][0]["status"] = "pass"
    copy = tmp_path / "edited.json"
    copy.write_text(json.dumps(report))
    code, _, err = run_cli("report", str(copy), "--store", str(tmp_path / "other"))
    assert code == 2 and "segments.0.checks: do not follow" in err, err
    assert "decflow report RUN -o FILE" in err
    # a message edited alone is prose: the verdicts still follow
    report["segments"][0]["checks"][0]["status"] = "not_established"
    report["segments"][0]["checks"][0]["message"] += " (worded otherwise)"
    copy.write_text(json.dumps(report))
    assert run_cli("report", str(copy), "--store", str(tmp_path / "other"))[0] == 0


def test_a_stored_run_judged_otherwise_by_its_decflow_is_judged_again_with_c(
        tmp_path: Path) -> None:
    import hashlib

    shutil.copytree(OLDER, tmp_path / "old")
    store = tmp_path / "old" / "store"
    folder = store / "runs" / OLDER_CHECK
    # as a decflow whose statistics failed the undecided segment would have stored it
    report = json.loads((folder / "report.json").read_text())
    for checks in (report["segments"][0]["checks"], report["checks"]):
        for check in checks:
            if check["status"] == "not_established":
                check["status"] = "fail"
    report["segments"][0]["status"] = "fail"
    report |= {"status": "fail", "exit_code": 1}
    data = json.dumps(report).encode()
    (folder / "report.json").write_bytes(data)
    record = json.loads((folder / "run.json").read_text())
    record |= {"status": "fail", "exit_code": 1}
    record["files"]["report.json"] = "sha256:" + hashlib.sha256(data).hexdigest()
    (folder / "run.json").write_text(json.dumps(record))
    code, _, err = run_cli("report", OLDER_CHECK, "--store", str(store))
    assert code == 2, err
    # the advice is not the circular `decflow report RUN -o FILE`, and it works
    assert f"`decflow report {OLDER_CHECK} -c CONTRACT`" in err and "-o FILE" not in err
    code, text, err = run_cli("report", OLDER_CHECK, "-c", str(tmp_path / "old" / "decflow.yaml"),
                              "--store", str(store))
    assert code == 0, err
    assert text.startswith("WARN 1/5: segment[locale=l00].min_accuracy not established")
