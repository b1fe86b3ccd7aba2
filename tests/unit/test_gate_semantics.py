"""The shared gate semantics (PRODUCT §4): the not-established status, evidence checks, the
run status they give, the headline every view leads with, and JUnit's skipped testcase."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from decflow.gates import (
    Check,
    Evidence,
    evidence_check,
    failing_first,
    headline,
    make_check,
    number,
    status_of,
)
from decflow.gates.headline import Qualifier, e_value
from decflow.views.junit import render_junit


def evidence(verdict: str, estimate: float = 0.1, low: float = 0.02, high: float = 0.2,
             **more: object) -> Evidence:
    return Evidence(method="test", n=40, verdict=verdict,  # type: ignore[arg-type]
                    estimate=estimate, low=low, high=high, **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(("verdict", "level", "status"), [
    ("holds", "requirement", "pass"),
    ("fails", "requirement", "fail"),
    ("fails", "warning", "warn"),
    ("not_established", "requirement", "not_established"),
    ("not_established", "warning", "not_established"),
])
def test_evidence_check_status_follows_the_evidence_not_the_estimate(
    verdict: str, level: str, status: str
) -> None:
    # The estimate 0.1 is above the limit 0.05 in every row: only the evidence decides.
    check = evidence_check("stability.verdict", level, "stability.flip_rate",  # type: ignore[arg-type]
                           "<=", 0.05, evidence(verdict))
    assert check.status == status
    assert check.value == 0.1
    assert "[0.02, 0.2] (95% per side, n=40)" in check.message


def test_not_established_message_names_cases_needed_and_detectable_effect() -> None:
    check = evidence_check("g", "requirement", "m", "<=", 0.05,
                           evidence("not_established", cases_needed=120, detectable=0.08))
    assert check.message.endswith(
        "not established: about 120 cases needed; detects ≥ 0.08 at 80% power")


def test_not_established_is_never_a_pass() -> None:
    undecided = evidence_check("g", "requirement", "m", "<=", 0.05, evidence("not_established"))
    held = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.8, 0.9)
    assert status_of([held, undecided]) == ("warn", 0)
    assert status_of([held, undecided], fail_on_warn=True) == ("warn", 1)
    failed = make_check("max_ece", "requirement", "ece", "<=", 0.1, 0.2)
    assert status_of([undecided, failed]) == ("fail", 1)
    assert status_of([held]) == ("pass", 0)


def test_check_round_trips_through_its_json_with_and_without_evidence() -> None:
    plain = make_check("max_ece", "requirement", "ece", "<=", 0.1, 0.2)
    assert "evidence" not in plain.to_dict()  # DecGuard parity: DecGuard's keys only
    assert Check.from_dict(plain.to_dict()) == plain
    judged = evidence_check("g", "warning", "m", "<=", 0.05,
                            evidence("not_established", cases_needed=9, notes=("underpowered",)))
    data = judged.to_dict()
    assert data["evidence"]["notes"] == ["underpowered"] and "detectable" not in data["evidence"]
    assert Check.from_dict(data) == judged


def test_headline_lists_failing_requirements_then_warnings_then_undecided() -> None:
    checks = [
        make_check("min_accuracy", "requirement", "accuracy", ">=", 0.85, 0.9),
        evidence_check("counterfactual.gender.max_flip_rate", "requirement", "m", "<=", 0.05,
                       evidence("not_established", cases_needed=40)),
        make_check("max_brier", "warning", "brier", "<=", 0.2, 0.31),
        make_check("max_ece", "requirement", "ece", "<=", 0.15, 0.175),
        make_check("option_order.max_violation_rate", "requirement",
                   "option_order.violation_rate", "<=", 0.0, 0.82),
    ]
    status, _ = status_of(checks)
    assert headline(status, checks) == (
        "FAIL 2/5 (2 WARN): max_ece 0.175 > 0.15; option_order.max_violation_rate 0.82 > 0; "
        "max_brier 0.31 > 0.2 (warning); "
        "counterfactual.gender.max_flip_rate not established (about 40 cases needed)"
    )
    assert [c.gate for c in failing_first(checks)][-1] == "min_accuracy"


def test_headline_of_a_pass_an_evidence_failure_and_many_failures() -> None:
    held = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.85, 0.9)
    assert headline("pass", [held, held]) == "PASS: 2/2 gates hold"
    assert headline("pass", []) == "PASS: no gates"
    shown = evidence_check("max_smooth_ece", "requirement", "smooth_ece", "<=", 0.05,
                           evidence("fails", estimate=0.12, low=0.08, high=0.16))
    assert headline("fail", [shown]) == "FAIL 1/1: max_smooth_ece 0.12 [0.08, 0.16] > 0.05"
    low = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.85, None)
    assert headline("fail", [low] * 6) == (
        "FAIL 6/6: " + "; ".join(["min_accuracy n/a"] * 4) + "; +2 more")


def test_headline_counts_the_gates_of_its_status_and_the_warnings_beside_a_fail() -> None:
    """The loan run's shape: one failing requirement beside four warnings (two failing
    warning gates, two not established) is `FAIL 1/15 (4 WARN)`, not `FAIL 5/15`."""
    held = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.85, 0.9)
    failed = make_check("max_ece", "requirement", "ece", "<=", 0.15, 0.175)
    warned = make_check("max_brier", "warning", "brier", "<=", 0.2, 0.31)
    undecided = evidence_check("stability.verdict", "requirement", "m", "<=", 0.05,
                               evidence("not_established", cases_needed=30))
    checks = [held] * 10 + [failed, warned, warned, undecided, undecided]
    assert headline("fail", checks).startswith("FAIL 1/15 (4 WARN): max_ece 0.175 > 0.15; ")
    # a WARN counts its own: failing warnings and not-established gates alike
    assert headline("warn", [held, warned, undecided]).startswith("WARN 2/3: max_brier")
    assert headline("fail", [failed, held]) == "FAIL 1/2: max_ece 0.175 > 0.15"


def test_qualifiers_follow_the_counts_and_never_change_the_verdict() -> None:
    held = make_check("max_error_rate", "requirement", "error_rate", "<=", 0.0, 0.0)
    zero = Qualifier("zero_limit", "max_error_rate judged at 0.02, 0 of 248 sent")
    weak = Qualifier("underpowered", "min_accuracy lower bound 0.37")
    assert headline("pass", [held, held], qualifiers=[zero]) == (
        "PASS (zero_limit: max_error_rate judged at 0.02, 0 of 248 sent): 2/2 gates hold")
    warned = make_check("max_brier", "warning", "brier", "<=", 0.2, 0.31)
    failed = make_check("max_ece", "requirement", "ece", "<=", 0.15, 0.175)
    assert headline("fail", [failed, warned], qualifiers=[zero, weak]) == (
        "FAIL 1/2 (1 WARN) (zero_limit: max_error_rate judged at 0.02, 0 of 248 sent) "
        "(underpowered: min_accuracy lower bound 0.37): max_ece 0.175 > 0.15; "
        "max_brier 0.31 > 0.2 (warning)")
    assert headline("warn", [warned], label="ALARM since 2026-11-04") == (
        "ALARM since 2026-11-04 1/1: max_brier 0.31 > 0.2 (warning)")
    assert Qualifier.from_dict(zero.to_dict()) == zero


@pytest.mark.parametrize(("value", "shown"), [
    (0.175, "0.175"), (0.8181818, "0.8182"), (0.0, "0"), (-0.00001, "-1e-05"),
    (-0.00000000001, "-1e-11"), (1234.56, "1235"), (-0.0, "0"), (None, "n/a"), (1.0, "1"),
])
def test_number_is_one_rounding_rule(value: float | None, shown: str) -> None:
    assert number(value) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (0.002299, "0.002299"), (414.5, "414.5"), (999_999.0, "999999"), (1e15, "1e+15"),
    (3.24e7, "3.2e+07"), (None, "n/a"),
])
def test_e_values_past_a_million_show_as_powers_of_ten(value: float | None, shown: str) -> None:
    assert e_value(value) == shown


def test_junit_writes_not_established_as_skipped_with_the_headline() -> None:
    undecided = evidence_check("stability.verdict", "warning", "stability.flip_rate", "<=",
                               0.05, evidence("not_established", cases_needed=30))
    failed = make_check("max_ece", "requirement", "ece", "<=", 0.1, 0.2)
    held = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.8, 0.9)
    checks = [c.to_dict() for c in (held, undecided, failed)]
    report = {"status": "fail", "exit_code": 1, "mode": "all", "checks": checks,
              "headline": headline("fail", checks), "contract": {"name": "refund"}}
    suite = ET.fromstring(render_junit(report)).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["min_accuracy", "stability.verdict (warning)",
                                              "max_ece"]  # report order, unchanged
    skipped = cases[1].find("skipped")
    assert skipped is not None and cases[1].find("failure") is None
    # PRODUCT §4: <skipped message="not established: …">, then the check's own message
    assert skipped.get("message", "").startswith(
        "not established: stability.flip_rate 0.1 <= 0.05")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["message"] == ("FAIL 1/3 (1 WARN): max_ece 0.2 > 0.1; "
                                "stability.verdict not established (about 30 cases needed)")
