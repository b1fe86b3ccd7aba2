"""`decflow report REPORT -c CONTRACT` judges every gate the report's mode carries (golden,
properties, diagnostics): DecGuard 0.1 fuzz and `test --all` reports from their inline
transformed cases, decflow runs of every mode from their stored stages, and a decflow report
file away from its store is refused rather than re-gated in part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, FIXTURES, ROOT, VECTORS

DECGUARD_FUZZ = FIXTURES / "decguard-reports" / "refund-order_sensitive-fuzz.json"
DECGUARD_CONTRACT = EXAMPLES / "refund" / "decguard.yaml"


def regated(*args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run_cli("report", *args, "-f", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def edited_contract(tmp_path: Path, edit: dict[str, Any]) -> Path:
    """The DecGuard refund contract beside a copy of its dataset, with `edit` applied to
    its `properties`."""
    contract = yaml.safe_load(DECGUARD_CONTRACT.read_text())
    for prop, settings in edit.items():
        if settings is None:
            del contract["properties"][prop]
        else:
            contract["properties"][prop].update(settings)
    (tmp_path / "cases.jsonl").write_bytes((EXAMPLES / "refund" / "cases.jsonl").read_bytes())
    path = tmp_path / "decguard.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def test_a_decguard_fuzz_report_regates_to_decguards_own_property_checks(
        tmp_path: Path) -> None:
    reference = json.loads(DECGUARD_FUZZ.read_text())
    code, report = regated(str(DECGUARD_FUZZ), "-c", str(DECGUARD_CONTRACT),
                           "--store", str(tmp_path / "store"))
    # the 13 property checks DecGuard 0.1.1 wrote, value for value; no golden gate (fuzz)
    assert report["checks"] == reference["checks"]
    assert (code, report["status"], report["headline"]) == (
        1, "fail", "FAIL 1/13: option_order.max_violation_rate 0.8182 > 0")


def test_a_decguard_fuzz_report_regated_with_new_property_limits(tmp_path: Path) -> None:
    # DecGuard's documented example: the order-sensitive fuzz report with
    # `max_tv_distance: 0.2` re-gates to PASS; a property no longer enabled leaves
    relaxed = edited_contract(tmp_path, {"option_order": {"max_tv_distance": 0.2},
                                         "paraphrase": None})
    code, report = regated(str(DECGUARD_FUZZ), "-c", str(relaxed),
                           "--store", str(tmp_path / "store"))
    gates = [c["gate"] for c in report["checks"]]
    assert (code, report["status"]) == (0, "pass")
    assert len(gates) == 11 and not any(g.startswith("paraphrase.") for g in gates)
    assert not report["properties"]["failures"]


def decguard_all_report(tmp_path: Path) -> Path:
    """DecGuard's `test --all` report of the order-sensitive refund run: its fuzz report's
    results and transformed cases with the golden checks DecGuard's `test` run of the same
    backend wrote first (the latency check's value is this run's own p95)."""
    report = json.loads(DECGUARD_FUZZ.read_text())
    golden = json.loads((VECTORS / "golden-refund-test-order_sensitive.json").read_text())
    checks = golden["checks"]
    p95 = report["metrics"]["latency"]["p95_ms"]
    checks[-1] |= {"value": p95, "message": f"latency_p95_ms {p95:.4g} <= 500"}
    report |= {"mode": "all", "checks": checks + report["checks"]}
    path = tmp_path / "decguard-all.json"
    path.write_text(json.dumps(report))
    return path


def test_a_decguard_all_report_regates_golden_and_property_gates(tmp_path: Path) -> None:
    stored = json.loads(decguard_all_report(tmp_path).read_text())
    assert run_cli("report", str(tmp_path / "decguard-all.json"),
                   "--store", str(tmp_path / "store"))[0] == 1  # it verifies as stored
    code, report = regated(str(tmp_path / "decguard-all.json"), "-c", str(DECGUARD_CONTRACT),
                           "--store", str(tmp_path / "store"))
    assert [c["gate"] for c in report["checks"]] == [c["gate"] for c in stored["checks"]]
    assert [c["status"] for c in report["checks"]] == [c["status"] for c in stored["checks"]]
    assert [g for g, s in ((c["gate"], c["status"]) for c in report["checks"])
            if s == "fail"] == ["max_ece", "option_order.max_violation_rate"]
    assert code == 1
    # with the ECE gate and the option-order limit relaxed, nothing fails
    relaxed = edited_contract(tmp_path, {"option_order": {"max_tv_distance": 0.2}})
    contract = yaml.safe_load(relaxed.read_text())
    contract["requirements"]["max_ece"] = 0.2
    relaxed.write_text(yaml.safe_dump(contract, sort_keys=False))
    code, report = regated(str(tmp_path / "decguard-all.json"), "-c", str(relaxed),
                           "--store", str(tmp_path / "store"))
    assert (code, report["status"], len(report["checks"])) == (0, "pass", 18)


LOAN = ROOT / "contracts" / "loan" / "decflow.yaml"


@pytest.mark.parametrize("mode", ["test", "fuzz", "test --all", "stability"])
def test_a_decflow_run_of_every_mode_regates_every_gate_it_carries(
        tmp_path: Path, mode: str) -> None:
    store, out = str(tmp_path / "store"), tmp_path / "report.json"
    code, _, err = run_cli(*mode.split(), str(LOAN), "--store", store, "-o", str(out))
    assert code in (0, 1), err
    stored = json.loads(out.read_text())
    code, report = regated(stored["run"]["id"], "-c", str(LOAN), "--store", store)
    assert [(c["gate"], c["status"]) for c in report["checks"]] == [
        (c["gate"], c["status"]) for c in stored["checks"]]
    assert (report["status"], code) == (stored["status"], stored["exit_code"])
    # the report file away from its store: every gate again, or a refusal naming the store
    code, shown, err = run_cli("report", str(out), "-c", str(LOAN),
                               "--store", str(tmp_path / "elsewhere"), "-f", "json")
    if mode == "test":
        assert [c["gate"] for c in json.loads(shown)["checks"]] == [
            c["gate"] for c in stored["checks"]]
    else:
        assert code == 2 and not shown
        assert f"--store {store}`" in err and "does not carry" in err, err
