"""Policy routes, `decflow run` and the Python SDK (DecGuard's verified refund examples)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import decflow
from decflow.errors import DecflowError, ReportError
from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES

REFUND = str(EXAMPLES / "refund" / "decguard.yaml")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("The blender arrived damaged", "accept · selected refund · confidence 0.960 · route 0"),
        ("The parcel never arrived",
         "fallback -> strong_model · selected refund · confidence 0.900 · route 1"),
        ("Can someone call me?", "human_review · selected review · confidence 0.650 · route 2"),
    ],
)
def test_run_matches_reference_lines(text: str, line: str):
    code, out, _ = run_cli("run", REFUND, text)
    assert code == 0
    assert out.strip() == line


def test_run_json_and_errors(tmp_path: Path):
    code, out, _ = run_cli("run", REFUND, "damaged", "-f", "json")
    document = json.loads(out)
    assert code == 0 and document["action"] == "accept" and document["route_index"] == 0
    assert document["result"]["probabilities"] == {"refund": 0.96, "reject": 0.01,
                                                   "review": 0.03}
    code, _, err = run_cli("run", str(EXAMPLES / "spam" / "decguard.yaml"), "x")
    assert code == 2 and "the contract has no 'policy' section" in err
    code, _, err = run_cli("run", REFUND, "[1]", "--input-json")
    assert code == 2 and "JSON object" in err


def test_sdk_decide_and_fallback_is_only_a_directive():
    with decflow.DecisionGuard.from_contract(REFUND) as guard:
        decision = guard.decide("The parcel never arrived", case_id="c1")
    assert (decision.action, decision.fallback_backend, decision.route_index) == (
        "fallback", "strong_model", 1
    )
    assert decision.result["case_id"] == "c1" and decision.result["backend"] == "default"
    # the strong model was not called: the result is still the default backend's answer
    assert decision.result["confidence"] == 0.9


def test_sdk_reports_equal_the_cli(tmp_path: Path):
    report = decflow.run_test(REFUND, store=str(tmp_path / "s"))
    out = tmp_path / "cli.json"
    run_cli("test", REFUND, "--store", str(tmp_path / "s"), "-o", str(out))
    cli = json.loads(out.read_text())
    for key in ("status", "exit_code", "checks", "failures", "dataset", "contract"):
        if key == "checks":
            assert [c["gate"] for c in report[key]] == [c["gate"] for c in cli[key]]
        else:
            assert report[key] == cli[key]
    check = decflow.run_check(REFUND, str(EXAMPLES / "refund" / "production.jsonl"))
    assert check["status"] == "pass"
    with pytest.raises(DecflowError):
        decflow.DecisionGuard.from_contract(str(EXAMPLES / "spam" / "decguard.yaml")).decide("x")


def test_diff_against_accepted_baseline(tmp_path: Path):
    store = str(tmp_path / "s")
    first = decflow.run_test(REFUND, store=store)
    # Nothing to compare with is not a verdict: the diff cannot run (exit 2) and says how
    # to accept a baseline.
    with pytest.raises(DecflowError) as raised:
        decflow.run_diff("accepted", first["run"]["id"], store=store)
    message = str(raised.value)
    assert "no accepted baseline for decision 'refund_request' and backend 'default'" in message
    assert f"decflow runs accept {first['run']['id']} --store {store}" in message
    code, out, err = run_cli("diff", "accepted", first["run"]["id"], "--store", store)
    assert (code, out) == (2, "") and "decflow runs accept" in err and "WARN" not in err
    code, _, _ = run_cli("runs", "accept", first["run"]["id"], "--store", store)
    assert code == 0
    second = decflow.run_test(REFUND, store=store)
    diff = decflow.run_diff("accepted", second["run"]["id"], contract=REFUND, store=store)
    assert diff["status"] == "pass" and diff["counts"]["answer_flips"] == 0
    assert diff["baseline"]["path"].endswith(first["run"]["id"])


def test_typed_report_gives_each_kind_its_model(tmp_path: Path) -> None:
    from decflow.report.check_report import CheckReport
    from decflow.report.diff_report import DiffReport
    from decflow.report.run_report import RunReport

    store = str(tmp_path / "s")
    first = decflow.run_test(REFUND, store=store)
    second = decflow.run_test(REFUND, store=store)
    check = decflow.run_check(REFUND, str(EXAMPLES / "refund" / "production.jsonl"), store=store)
    diff = decflow.run_diff(first["run"]["id"], second["run"]["id"], store=store)
    for report, model in ((first, RunReport), (check, CheckReport), (diff, DiffReport)):
        typed = decflow.typed_report(report)
        assert type(typed) is model
        assert typed.status == report["status"]
        assert [c.gate for c in typed.checks] == [c["gate"] for c in report["checks"]]
        assert typed.to_dict() == report
    assert decflow.typed_report(first).metrics.counts.total == first["metrics"]["counts"]["total"]
    with pytest.raises(ReportError) as raised:
        decflow.typed_report({**first, "status": "green", "exit_code": "0"})
    assert "status" in str(raised.value) and "exit_code" in str(raised.value)
