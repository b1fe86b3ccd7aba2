"""`max_smooth_ece` end to end (golden run and production check) and the `calibration`
section beside DecGuard's unchanged metrics: the refund example's 10 labeled cases cannot show
SmoothECE within 0.05 either way, so the gate is not established (WARN, never a PASS)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, ROOT

REFUND = ROOT / "contracts" / "refund"


def refund(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    shutil.copy(EXAMPLES / "refund" / data["dataset"], tmp_path / data["dataset"])
    data.update(changes)
    path = tmp_path / "refund.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def report_of(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "report.json"
    code, _, err = run_cli(*args, "--store", str(tmp_path / "store"), "-o", str(out))
    assert out.exists(), err
    return code, json.loads(out.read_text())


def test_golden_max_smooth_ece_is_an_evidence_check(tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / "refund" / "decguard.yaml").read_text())
    requirements = {**data["requirements"], "max_smooth_ece": 0.05}
    code, report = report_of(tmp_path, "test", str(refund(tmp_path, requirements=requirements)))
    check = next(c for c in report["checks"] if c["gate"] == "max_smooth_ece")
    assert check["status"] == "not_established" and check["metric"] == "smooth_ece"
    evidence = check["evidence"]
    labeled = report["metrics"]["calibration"]["n"]  # decided cases with an expected label
    assert evidence["n"] == labeled and evidence["low"] <= 0.05 <= evidence["high"]
    assert report["status"] == "warn" and code == 0
    calibration = report["calibration"]
    assert calibration["n"] == labeled
    assert calibration["smooth_ece"]["value"] > 0 and calibration["corp"] is not None
    # The binned ECE's floor at 11 cases is far above the example's max_ece 0.15.
    (gate,) = calibration["binned_ece"]["gates"]
    assert gate == {"gate": "max_ece", "level": "requirement", "limit": 0.15,
                    "noise_dominated": True}
    assert "max_smooth_ece" not in report["requirements"]  # DecGuard's keys unchanged


def test_production_max_smooth_ece_from_merged_statistics(tmp_path: Path) -> None:
    data = yaml.safe_load((REFUND / "decflow.yaml").read_text())
    shutil.copy(REFUND / data["dataset"], tmp_path / data["dataset"])
    data["production"]["warnings"] = {"max_smooth_ece": 0.05}
    contract = tmp_path / "decflow.yaml"
    contract.write_text(yaml.safe_dump(data, sort_keys=False))
    code, report = report_of(tmp_path, "check", str(contract),
                             "-d", str(REFUND / "production.jsonl"))
    check = next(c for c in report["checks"] if c["gate"] == "max_smooth_ece")
    assert (check["level"], check["status"]) == ("warning", "not_established")
    assert report["calibration"]["smooth_ece"]["bandwidth"] > 0
    assert report["calibration"]["binned_ece"]["noise_floor"]["p95"] > 0
    assert code == 0


def test_a_limit_finer_than_the_grid_is_refused(tmp_path: Path) -> None:
    contract = refund(tmp_path, requirements={"max_smooth_ece": 0.005})
    code, _, err = run_cli("validate", str(contract))
    assert code == 2 and "max_smooth_ece" in err
