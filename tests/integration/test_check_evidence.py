"""`decflow check` with evidence-gated production gates, end to end: `production.gating:
evidence` judges the drift and segment gates by their bounds and noise floors, the report
says so (`config.gating`, decflow/4) and verifies when read back, and a re-gate with
`production.gating: point` gives DecGuard's point verdicts from the same stored numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from decflow.contracts import load_contract
from decflow.data.records.reader import RecordSpec, normalize_objects
from decflow.metrics.production import partition_stats
from decflow.pipeline.production.statistics import Aggregates
from decflow.pipeline.production.summary import summarize
from tests.support.cli import run_cli
from tests.support.paths import REFERENCE

EXAMPLE = REFERENCE / "decguard-examples" / "refund"
GATES = {"max_confidence_tv_distance": 0.05, "max_accuracy_drop": 0.02}


def write_records(path: Path, n: int, *, seed: int, low: float = 0.75) -> Path:
    """n refund records, top confidence uniform in [low, 1), 88 % right, in two locales."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        confidence = float(rng.uniform(low, 0.999))
        rest = (1.0 - confidence) / 2
        right = bool(rng.random() < 0.88)
        lines.append(json.dumps({
            "id": f"r{i}", "timestamp": "2026-11-04T10:00:00Z", "decision": "refund_request",
            "probabilities": {"refund": confidence, "reject": rest, "review": rest},
            "selected": "refund", "outcome": "refund" if right else "reject",
            "metadata": {"locale": "en" if i % 2 else "de"}}))
    path.write_text("\n".join(lines) + "\n")
    return path


def contract_file(tmp_path: Path, gating: str) -> Path:
    document = yaml.safe_load((EXAMPLE / "decguard.yaml").read_text())
    document["production"] = {"segments": ["locale"], "gating": gating,
                              "requirements": dict(GATES),
                              "segment_requirements": {"min_accuracy": 0.8}}
    path = tmp_path / f"{gating}.yaml"
    shutil.copy(EXAMPLE / "cases.jsonl", tmp_path / "cases.jsonl")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    return {"baseline": write_records(tmp_path / "baseline.jsonl", 4000, seed=1),
            "same": write_records(tmp_path / "same.jsonl", 1000, seed=2),
            "shifted": write_records(tmp_path / "shifted.jsonl", 1000, seed=3, low=0.55)}


def check(contract: Path, records: Path, baseline: Path, store: Path) -> dict[str, Any]:
    out = store.parent / "check.json"
    code, _, err = run_cli("check", str(contract), "-d", str(records), "--baseline",
                           str(baseline), "--store", str(store), "-o", str(out))
    report: dict[str, Any] = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return report


def test_a_confidence_shift_fails_by_evidence_and_the_run_verifies(
        tmp_path: Path, data: dict[str, Path]) -> None:
    store = tmp_path / "store"
    report = check(contract_file(tmp_path, "evidence"), data["shifted"], data["baseline"], store)
    assert report["report_version"] == "decflow/4" and report["config"]["gating"] == "evidence"
    assert report["status"] == "fail" and report["exit_code"] == 1
    tv = next(c for c in report["checks"] if c["gate"] == "max_confidence_tv_distance")
    assert tv["status"] == "fail"
    assert tv["evidence"]["low"] > 0.05 and "noise floor" in tv["evidence"]["notes"][0]
    assert "Holm across 4 requirement checks" in tv["evidence"]["notes"]  # 2 + 2 segments
    # the stored run verifies (every verdict re-derived from its numbers) and shows alike
    code, out, err = run_cli("report", report["run"]["id"], "--store", str(store), "-f", "json")
    assert code == 1 and json.loads(out) == report, err


def test_the_same_model_is_not_failed_and_segments_are_judged_together(
        tmp_path: Path, data: dict[str, Path]) -> None:
    report = check(contract_file(tmp_path, "evidence"), data["same"], data["baseline"],
                   tmp_path / "store")
    assert report["status"] != "fail"
    statuses = {c["gate"]: c["status"] for c in report["checks"]}
    assert statuses["max_confidence_tv_distance"] in ("pass", "not_established")
    segment = [c for c in report["checks"] if c["gate"].startswith("segment[")]
    assert len(segment) == 2
    assert all("Holm across 4 requirement checks" in c["evidence"]["notes"] for c in segment)


def test_point_gating_re_gates_the_stored_numbers_as_decguard_would(
        tmp_path: Path, data: dict[str, Path]) -> None:
    store = tmp_path / "store"
    report = check(contract_file(tmp_path, "evidence"), data["same"], data["baseline"], store)
    point = contract_file(tmp_path, "point")
    code, out, err = run_cli("report", report["run"]["id"], "-c", str(point), "--store",
                             str(store), "-f", "json")
    regated = json.loads(out)
    assert "gating" not in regated["config"], err
    assert all("evidence" not in c for c in regated["checks"])
    direct = check(point, data["same"], data["baseline"], tmp_path / "store2")
    assert regated["checks"] == direct["checks"] and code == direct["exit_code"]


def test_a_check_without_a_baseline_leaves_drift_gates_not_established(
        tmp_path: Path, data: dict[str, Path]) -> None:
    out = tmp_path / "check.json"
    code, text, _ = run_cli("check", str(contract_file(tmp_path, "evidence")), "-d",
                            str(data["same"]), "-o", str(out))
    report = json.loads(out.read_text())
    drift = [c for c in report["checks"] if c["gate"] in GATES]
    assert [c["status"] for c in drift] == ["not_established"] * 2
    assert code == 0 and report["status"] == "warn"
    # two requirements are not established: the verdict line must not say they hold
    assert text.rstrip().splitlines()[-1] == (
        "WARN: no requirement fails; some gates do not hold or are not established")


def test_summarize_takes_the_gating_a_monitor_window_asks_for(
        tmp_path: Path, data: dict[str, Path]) -> None:
    contract = load_contract(contract_file(tmp_path, "point")).contract
    labels = tuple(contract.decision.labels)
    spec = RecordSpec.from_contract(contract)
    lines = data["same"].read_text().splitlines()[:300]
    table = normalize_objects([json.loads(line) for line in lines], spec, "same.jsonl")
    stats = partition_stats(table, labels, 10, None)
    aggregates = Aggregates(path="same", hash="sha256:0", files=["same.jsonl"],
                            overall=stats[""])
    point = summarize(contract, aggregates, created_at="2026-12-06T00:00:00Z").to_dict()
    window = summarize(contract, aggregates, created_at="2026-12-06T00:00:00Z",
                       gating="evidence").to_dict()
    assert "gating" not in point["config"] and window["config"]["gating"] == "evidence"
    assert all("evidence" not in c for c in point["checks"])
    assert all(c["evidence"] for c in window["checks"] if c["gate"] in GATES)
