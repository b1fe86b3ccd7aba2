"""Regression diff: DecGuard's own diff of the two refund golden runs as the oracle, plus
hand-computed cases for errors, unmatched ids, segments and gate levels."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from decflow.contracts import load_contract
from decflow.contracts.gates import regression_model
from decflow.errors import DecflowError
from decflow.pipeline.regression import diff_reports
from decflow.views.outputs import render_text
from tests.support.paths import FIXTURES, REFERENCE

EXAMPLE = REFERENCE / "decguard-examples" / "refund"
VECTORS = REFERENCE / "decguard-vectors"
LABELS = ["refund", "reject", "review"]
DECISION = {"name": "refund_request", "type": "choice", "labels": LABELS}


def _golden_report(name: str) -> dict:
    """A run report from DecGuard's stored golden results (cases.jsonl gives the inputs
    and metadata; per-case latencies are not part of the vectors)."""
    cases = {
        c["id"]: c for c in map(json.loads, (EXAMPLE / "cases.jsonl").read_text().splitlines())
    }
    golden = json.loads((VECTORS / name).read_text())
    results = []
    for item in golden["results"]:
        case = cases[item["case_id"]]
        probabilities = item["probabilities"]
        results.append({
            "case_id": item["case_id"], "input": case["input"], "expected": item["expected"],
            "metadata": case["metadata"], "error": None,
            "result": {"probabilities": probabilities, "selected": item["selected"],
                       "confidence": probabilities[item["selected"]], "latency_ms": None},
        })
    return {"contract": DECISION, "dataset": golden["dataset"], "mode": golden["mode"],
            "results": results}


def test_refund_default_vs_order_sensitive_equals_decguard() -> None:
    contract = load_contract(EXAMPLE / "decguard.yaml").contract
    report = diff_reports(
        _golden_report("golden-refund-test-default.json"),
        _golden_report("golden-refund-test-order_sensitive.json"),
        paths=("default.json", "order_sensitive.json"),
        contract=contract, contract_path="decguard.yaml",
    )
    oracle = json.loads((VECTORS / "diff-refund-default-vs-order_sensitive.json").read_text())
    for key in ("status", "exit_code", "same_dataset", "evaluation", "counts", "shift",
                "segments", "checks"):
        assert report[key] == oracle[key], key
    for name, entry in oracle["metrics"].items():
        if not name.startswith("latency"):
            assert report["metrics"][name] == entry, name
    assert report["changes"] == []
    text = render_text(report)
    assert "    FAIL  max_mean_tv_distance           mean_tv_distance 0.05082 violates <= 0.03\n" \
        in text
    assert "    PASS  max_accuracy_drop              accuracy_drop -0 <= 0.02\n" in text
    assert "    locale=en             n=11   accuracy 1 -> 1   flips 0.0%\n" in text
    assert "latency_p50_ms" not in text  # both sides missing: row hidden
    assert text.endswith("FAIL: the candidate regresses beyond the contract's limits\n")


def _case(case_id: str, probs: list[float] | None, expected: str | None = None,
          metadata: dict | None = None, latency: float | None = None) -> dict:
    if probs is None:
        return {"case_id": case_id, "input": f"text {case_id}", "expected": expected,
                "metadata": metadata or {}, "result": None,
                "error": {"kind": "timeout", "message": "too slow"}}
    probabilities = dict(zip(LABELS, probs, strict=True))
    selected = LABELS[probs.index(max(probs))]
    return {"case_id": case_id, "input": f"text {case_id}", "expected": expected,
            "metadata": metadata or {}, "error": None,
            "result": {"probabilities": probabilities, "selected": selected,
                       "confidence": probabilities[selected], "latency_ms": latency}}


def _report(cases: list[dict], dataset: str = "sha256:x") -> dict:
    return {"contract": DECISION, "dataset": {"hash": dataset},
            "evaluation": {"confidence_threshold": None, "calibration_bins": 10},
            "results": cases}


A = [1.0, 0.0, 0.0]
B = [0.0, 1.0, 0.0]
HALF = [0.5, 0.5, 0.0]


def _contract(segment_by=(), min_segment_size=5, warnings=None, **limits) -> SimpleNamespace:
    regression = regression_model().model_validate({
        **limits, "warnings": warnings or {}, "segment_by": list(segment_by),
        "min_segment_size": min_segment_size, "gating": "point"})
    evaluation = SimpleNamespace(
        model_dump=lambda: {"confidence_threshold": None, "calibration_bins": 10,
                            "probability_tolerance": 0.001, "max_concurrency": 4})
    decision = SimpleNamespace(name="refund_request", type="choice", labels=tuple(LABELS))
    return SimpleNamespace(decision=decision, regression=regression, evaluation=evaluation)


def _diff(baseline: list[dict], candidate: list[dict], **options) -> dict:
    return diff_reports(_report(baseline), _report(candidate, options.pop("dataset", "sha256:x")),
                        paths=("b.json", "c.json"), **options)


def test_counts_errors_and_changes_by_hand() -> None:
    baseline = [
        _case("same", A, "refund"), _case("flip", A, "refund"), _case("fixed", B, "refund"),
        _case("breaks", A, "refund"), _case("heals", None, "refund"), _case("dead", None),
        _case("gone", A),
    ]
    candidate = [
        _case("new", A), _case("dead", None), _case("heals", A, "refund"),
        _case("breaks", None, "refund"), _case("fixed", A, "refund"), _case("flip", B, "refund"),
        _case("same", HALF, "refund"),
    ]
    report = _diff(baseline, candidate, dataset="sha256:y")
    assert report["counts"] == {
        "baseline_cases": 7, "candidate_cases": 7, "matched": 6, "only_in_baseline": 1,
        "only_in_candidate": 1, "compared": 3, "answer_flips": 2, "newly_wrong": 1,
        "newly_correct": 1, "newly_errored": 1, "recovered": 1, "still_errored": 1,
    }
    shift = report["shift"]
    assert shift["answer_flip_rate"] == 2 / 3
    assert shift["mean_tv_distance"] == (1.0 + 1.0 + 0.5) / 3
    assert shift["max_tv_distance"] == 1.0
    assert shift["mean_confidence_delta"] == -0.5 / 3
    assert report["metrics"]["error_rate"] == {"baseline": 2 / 6, "candidate": 2 / 6,
                                               "delta": 0.0}
    assert [(c["case_id"], c["kind"]) for c in report["changes"]] == [
        ("heals", "recovered"), ("breaks", "newly_errored"), ("fixed", "flip"), ("flip", "flip"),
    ]
    assert report["changes"][1]["error"] == "timeout: too slow"
    assert report["changes"][2]["tv_distance"] == 1.0
    # Without a contract only the implicit error-rate requirement is checked.
    assert [c["gate"] for c in report["checks"]] == ["max_error_rate_increase"]
    assert report["same_dataset"] is False
    text = render_text(report)
    assert "note      the runs used different datasets; cases are matched by id" in text
    assert "    breaks       refund (1) -> error, expected refund (newly errored: timeout: " \
        "too slow)\n" in text


def test_error_rate_increase_fails_the_implicit_gate() -> None:
    report = _diff([_case("x", A), _case("y", A)], [_case("x", A), _case("y", None)])
    [check] = report["checks"]
    assert (check["value"], check["status"]) == (0.5, "fail")
    assert report["exit_code"] == 1


def test_segments_missing_values_and_gating() -> None:
    meta = [{"tier": "gold"}, {"tier": 2}, {"tier": {"b": 1, "a": 2}}, {}, {"tier": None}]
    baseline = [_case(f"c{i}", A, "refund", m) for i, m in enumerate(meta)]
    baseline += [_case(f"g{i}", A, "refund", {"tier": "gold"}) for i in range(5)]
    candidate = [_case(f"c{i}", B if i == 0 else A, "refund", m) for i, m in enumerate(meta)]
    candidate += [_case(f"g{i}", B if i < 2 else A, "refund", {"tier": "gold"})
                  for i in range(5)]
    contract = _contract(segment_by=["tier"], max_segment_accuracy_drop=0.3,
                         warnings={"max_answer_flip_rate": 0.1})
    report = _diff(baseline, candidate, contract=contract, contract_path="c.yaml")
    rows = [(s["value"], s["matched"], s["accuracy_drop"], s["gated"])
            for s in report["segments"]]
    assert rows == [
        ("(missing)", 1, 0.0, False), ("2", 1, 0.0, False), ("gold", 6, 0.5, True),
        ("null", 1, 0.0, False), ('{"a": 2, "b": 1}', 1, 0.0, False),
    ]
    gold = report["segments"][2]
    assert gold["answer_flip_rate"] == 3 / 6
    checks = {c["gate"]: c for c in report["checks"]}
    assert checks["max_segment_accuracy_drop"]["message"] == (
        "segment_accuracy_drop 0.5 violates <= 0.3 (worst segment tier=gold)"
    )
    assert [c["level"] for c in report["checks"]] == ["requirement", "requirement", "warning"]
    assert checks["max_answer_flip_rate"]["status"] == "warn"
    assert report["status"] == "fail"
    assert "(not gated: small)" in render_text(report)


def test_nothing_compared_fails_with_reason() -> None:
    contract = _contract(max_mean_tv_distance=0.1)
    report = _diff([_case("x", None)], [_case("x", A)], contract=contract, contract_path="c")
    assert report["shift"]["mean_tv_distance"] is None
    assert report["checks"][0]["message"] == (
        "mean_tv_distance could not be computed (no comparable cases)"
    )


def test_different_decisions_are_refused() -> None:
    other = {"name": "is_spam", "type": "noul", "labels": ["spam", "ham"]}
    with pytest.raises(DecflowError, match=r"cannot compare 'is_spam' \(noul: spam, ham\) with "
                                           r"'refund_request' \(choice: refund, reject, review\)"):
        diff_reports({**_report([]), "contract": other}, _report([]),
                     paths=("b", "c"))


def test_latency_percentiles_and_increase_gate() -> None:
    baseline = [_case(f"c{i}", A, latency=v) for i, v in enumerate([4.0, 1.0, 3.0, 2.0])]
    candidate = [_case(f"c{i}", A, latency=v) for i, v in enumerate([1.0, 2.0, 3.0, 14.0])]
    contract = _contract(max_latency_p95_increase_ms=5.0)
    report = _diff(baseline, candidate, contract=contract, contract_path="c")
    # percentile([1,2,3,4], 50) = 2.5 and (.., 95) = 3.85 (linear between closest ranks)
    assert report["metrics"]["latency_p50_ms"]["baseline"] == 2.5
    assert report["metrics"]["latency_p95_ms"]["baseline"] == pytest.approx(3.85)
    assert report["metrics"]["latency_p95_ms"]["candidate"] == pytest.approx(12.35)
    check = report["checks"][0]
    assert check["gate"] == "max_latency_p95_increase_ms" and check["status"] == "fail"


def test_decguard_reports_with_flips_equal_decguards_diff() -> None:
    fixtures = FIXTURES / "diff"
    baseline = json.loads((fixtures / "refund-default.json").read_text())
    candidate = json.loads((fixtures / "refund-strong_model.json").read_text())
    oracle = json.loads((fixtures / "diff-default-vs-strong_model.json").read_text())
    report = diff_reports(
        baseline, candidate, paths=("a.json", "c.json"),
        contract=load_contract(EXAMPLE / "decguard.yaml").contract,
        contract_path="decguard.yaml", segment_by=["locale"],
    )
    for key in ("status", "exit_code", "same_dataset", "evaluation", "counts", "shift",
                "metrics", "segments", "checks", "changes", "baseline", "candidate"):
        assert report[key] == oracle[key], key
    text = render_text(report)
    assert "    r3           reject (0.85) -> refund (0.98), expected reject\n" in text
    assert "  Answers      6 flipped (54.5%) · 5 newly wrong · 0 newly correct\n" in text
