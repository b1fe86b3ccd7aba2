"""End to end against a real LLM: SmolLM2-135M served by llama-cpp-python on 127.0.0.1.

`decflow test --all` with the `openai` backend on (a) a yes/no contract built from the
typed-gguf devset's 18 noul items and (b) the hand-written support-ticket contract: every
case is decided, and the model's position bias shows up as a failing option_order property.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.llm


def devset_rows() -> list[dict]:
    text = importlib.resources.files("typed_gguf.bench").joinpath("devset.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def noul_contract(folder: Path, url: str) -> Path:
    rows = [r for r in devset_rows() if r["type"] == "noul"]
    assert len(rows) == 18
    with (folder / "cases.jsonl").open("w") as out:
        for row in rows:
            case = {
                "id": row["id"],
                "input": f"{row['state']}\n\nQuestion: {row['instructions']}",
                "expected": "yes" if row["gold"] else "no",
            }
            out.write(json.dumps(case) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {
            "name": "ops_yes_no",
            "type": "noul",
            "labels": ["yes", "no"],
            "description": "Answer the question about the situation with yes or no.",
        },
        "backend": {"provider": "openai", "url": url, "model": "smollm2-135m"},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": 2},
        "properties": {"option_order": {"max_tv_distance": 0.05, "max_flip_rate": 0}},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def support_contract(folder: Path, url: str) -> Path:
    shutil.copytree(ROOT / "contracts" / "support-llm", folder, dirs_exist_ok=True)
    path = folder / "decflow.yaml"
    data = yaml.safe_load(path.read_text())
    data["backend"]["url"] = url
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_all(contract: Path, tmp_path: Path) -> dict:
    out = tmp_path / "report.json"
    code, _, err = run_cli("test", "--all", str(contract), "--store", str(tmp_path / "store"),
                           "-o", str(out))
    report = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return report


def assert_position_bias_found(report: dict) -> None:
    counts = report["metrics"]["counts"]
    assert counts["errored"] == 0 and counts["succeeded"] == counts["total"]
    for item in report["results"]:
        mass = item["result"]["metadata"]["label_mass"]
        assert 0 < mass <= 1.0 + 1e-9
    summary = next(s for s in report["properties"]["summaries"] if s["property"] == "option_order")
    assert summary["n_errors"] == 0 and summary["n_evaluated"] > 0
    assert summary["n_violations"] > 0  # distributions move with the option order
    check = next(c for c in report["checks"] if c["gate"] == "option_order.max_violation_rate")
    assert check["status"] == "fail"
    assert report["exit_code"] == 1


def test_noul_devset_contract(llm_server, tmp_path: Path):
    folder = tmp_path / "noul"
    folder.mkdir()
    report = run_all(noul_contract(folder, llm_server.url), tmp_path)
    assert report["metrics"]["counts"]["total"] == 18
    assert_position_bias_found(report)


def test_support_ticket_contract(llm_server, tmp_path: Path):
    report = run_all(support_contract(tmp_path / "support", llm_server.url), tmp_path)
    assert report["metrics"]["counts"]["total"] == 12
    assert_position_bias_found(report)
    failing = report["properties"]["failures"]
    assert failing and failing[0]["presentation"] is not None  # the shown order is recorded
