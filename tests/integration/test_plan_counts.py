"""`--plan` counts every call a run will make — originals, each metamorphic property's
transformed requests, reruns and persona arms — and the run then makes exactly that many,
on every example contract (the requests stage of the run holds one row per call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.paths import ROOT

RUNS = [("fuzz", "refund"), ("test --all", "refund"), ("test --all", "spam"),
        ("test --all", "severity"), ("fuzz", "loan"), ("stability", "loan")]


@pytest.mark.parametrize(("command", "example"), RUNS)
def test_the_plan_counts_the_calls_the_run_makes(command: str, example: str,
                                                 tmp_path: Path) -> None:
    contract = str(ROOT / "contracts" / example / "decflow.yaml")
    store = str(tmp_path / "store")
    code, text, err = run_cli(*command.split(), contract, "--plan", "-f", "json",
                              "--store", store)
    assert code == 0, err
    plan = json.loads(text)
    out = tmp_path / "r.json"
    code, _, err = run_cli(*command.split(), contract, "--store", store, "-o", str(out))
    assert code in (0, 1), err
    report = json.loads(out.read_text())
    assert plan["calls"] == report["run"]["artifacts"]["requests"]["rows"]
    assert plan["calls"] == (plan["original_calls"] + plan["property_calls"]
                             + plan["diagnostic_calls"])
    counts = {p["property"]: p["calls"] for p in plan["properties"]}
    for summary in (report.get("properties") or {}).get("summaries", []):
        assert counts[summary["property"]] >= summary["n_evaluated"]


def test_fuzz_plan_of_refund_names_each_property() -> None:
    code, text, _ = run_cli("fuzz", str(ROOT / "contracts" / "refund" / "decflow.yaml"),
                            "--plan")
    assert code == 0
    assert text.splitlines()[0] == ("plan (fuzz): 11 cases, 132 calls: 11 original + 121 "
                                    "property + 0 diagnostic")
    assert "  option_order             33 calls" in text.splitlines()
