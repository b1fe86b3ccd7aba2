"""Which gates a diff applies: the candidate run's own contract by default (a diff must not
PASS what the contract fails), `-c` when given, DecGuard's implicit error-rate gate for
DecGuard reports and for runs whose store is out of reach, each said in the output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.paths import FIXTURES, ROOT

REFUND = ROOT / "contracts" / "refund" / "decflow.yaml"


def two_runs(tmp_path: Path) -> tuple[str, str, str]:
    store = str(tmp_path / "store")
    ids = []
    for backend in ("default", "order_sensitive"):
        out = tmp_path / f"{backend}.json"
        run_cli("test", str(REFUND), "-b", backend, "--store", store, "-o", str(out))
        ids.append(json.loads(out.read_text())["run"]["id"])
    return store, ids[0], ids[1]


def diff(*args: str) -> tuple[int, dict, str]:
    code, text, err = run_cli("diff", *args, "-f", "json")
    assert code in (0, 1), err
    return code, json.loads(text), err


def gate_names(report: dict) -> set[str]:
    return {c["gate"] for c in report["checks"]}


def test_runs_are_gated_by_the_candidate_runs_own_contract(tmp_path: Path) -> None:
    store, base, cand = two_runs(tmp_path)
    code, report, _ = diff(base, cand, "--store", store)
    with_contract = diff(base, cand, "--store", store, "-c", str(REFUND))[1]
    assert code == 1 and report["status"] == "fail"
    assert "max_mean_tv_distance" in gate_names(report)
    assert report["checks"] == with_contract["checks"]
    assert report["gates_from"].startswith("the candidate run's own contract")
    assert report["contract"]["path"].endswith(f"runs/{cand}/contract.yaml")
    assert with_contract["gates_from"] == f"the contract {REFUND}"
    _, text, _ = run_cli("diff", base, cand, "--store", store)
    assert "gates     the candidate run's own contract" in text
    assert text.rstrip().endswith("FAIL: the candidate regresses beyond the contract's limits")


def test_decguard_reports_keep_decguards_implicit_gate(tmp_path: Path) -> None:
    # DecGuard's own diff of these two reports passes without -c (only error rates gate)
    code, report, _ = diff(str(FIXTURES / "diff" / "refund-default.json"),
                           str(FIXTURES / "diff" / "refund-strong_model.json"),
                           "--store", str(tmp_path / "store"))
    assert gate_names(report) == {"max_error_rate_increase"} and code == 0
    assert "a DecGuard report carries no contract" in report["gates_from"]


def test_a_report_whose_store_is_gone_falls_back_and_says_so(tmp_path: Path) -> None:
    store, base, cand = two_runs(tmp_path)
    files = []
    for run_id in (base, cand):
        target = tmp_path / f"{run_id}.json"
        shutil.copy(Path(store) / "runs" / run_id / "report.json", target)
        files.append(str(target))
    shutil.rmtree(store)
    code, report, _ = diff(*files, "--store", str(tmp_path / "other"))
    assert "max_mean_tv_distance" not in gate_names(report)
    assert "is not reachable" in report["gates_from"]
    assert "pass -c CONTRACT" in report["gates_from"]
    assert code == report["exit_code"]
