"""Gates against DecGuard 0.1.1: the checks it stored for the example runs (golden,
property, production and diff checks share one message format) and the documented rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from decflow.gates import Check, golden_checks, make_check, status_of
from tests.support.paths import VECTORS
from tests.unit.test_metrics_golden import GOLDEN_RUNS, load_golden_run


def gates(**set_gates: float) -> dict[str, float]:
    """A gate section as a report keeps it: the gates it sets (unset ones read as None)."""
    return dict(set_gates)


def contract_gates(section: dict[str, Any] | None) -> dict[str, float]:
    return gates(**(section or {}))


def stored_checks(name: str) -> list[dict[str, Any]]:
    return list(json.loads((VECTORS / name).read_text())["checks"])


def metrics(**values: float | None) -> dict[str, Any]:
    """A metrics object with the given gate values (others None, error_rate 0)."""
    return {
        "counts": {"error_rate": values.get("error_rate", 0.0)},
        "classification": {key: values.get(key) for key in ("accuracy", "macro_f1", "ordinal_mae")},
        "calibration": {key: values.get(key) for key in ("nll", "brier", "ece")},
        "selective": {
            key: values.get(key) for key in ("coverage", "abstention_rate", "selective_accuracy")
        },
        "latency": {"p95_ms": values.get("latency_p95_ms")},
    }


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS))
def test_golden_checks_reproduce_stored_runs(name: str) -> None:
    run = load_golden_run(name)
    computed = run.metrics()
    # Latency is measured, not reproducible: gate the stored value instead.
    computed["latency"] = run.report["metrics"]["latency"]
    checks = golden_checks(
        computed,
        contract_gates(run.contract.get("requirements")),
        contract_gates(run.contract.get("warnings")),
        run.decision_type,
    )
    reference = [c for c in run.report["checks"] if "." not in c["gate"]]
    assert [c.to_dict() for c in checks] == reference


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS))
def test_status_and_exit_code_of_stored_runs(name: str) -> None:
    report = json.loads((VECTORS / name).read_text())
    checks = [Check(**c) for c in report["checks"]]
    assert status_of(checks) == (report["status"], report["exit_code"])


STORED_CHECK_FILES = [
    "summaries-refund-default-seed42.json",
    "summaries-refund-order_sensitive-seed42.json",
    "summaries-severity-seed0.json",
    "summaries-spam-seed0.json",
    "check-refund.json",
    "check-refund-drift.json",
    "diff-refund-default-vs-order_sensitive.json",
    *sorted(GOLDEN_RUNS),
]


@pytest.mark.parametrize("name", STORED_CHECK_FILES)
def test_make_check_formats_every_stored_check(name: str) -> None:
    for stored in stored_checks(name):
        tail = stored["message"].split(" (", 1)
        suffix = f" ({tail[1]}" if len(tail) == 2 else ""
        check = make_check(
            stored["gate"],
            stored["level"],
            stored["metric"],
            stored["comparison"],
            stored["threshold"],
            stored["value"],
            suffix=suffix,
        )
        assert check.to_dict() == stored


# --- rules ---


def test_null_metric_fails_at_requirement_level() -> None:
    checks = golden_checks(metrics(accuracy=None), gates(min_accuracy=0.9), gates(), "choice")
    assert checks[0].to_dict() == {
        "gate": "min_accuracy",
        "level": "requirement",
        "metric": "accuracy",
        "comparison": ">=",
        "threshold": 0.9,
        "value": None,
        "status": "fail",
        "message": "accuracy could not be computed (no eligible cases)",
    }
    assert status_of(checks) == ("fail", 1)


def test_null_metric_warns_at_warning_level() -> None:
    checks = golden_checks(metrics(), gates(), gates(max_latency_p95_ms=500), "choice")
    assert [(c.gate, c.level, c.status) for c in checks] == [
        ("max_error_rate", "requirement", "pass"),
        ("max_latency_p95_ms", "warning", "warn"),
    ]
    assert checks[1].message == "latency_p95_ms could not be computed (no eligible cases)"


def test_warning_only_failure_warns_and_fail_on_warn_exits_1() -> None:
    checks = golden_checks(
        metrics(accuracy=0.95, ece=0.2), gates(min_accuracy=0.9), gates(max_ece=0.15), "choice"
    )
    assert [c.status for c in checks] == ["pass", "pass", "warn"]
    assert checks[2].message == "ece 0.2 violates <= 0.15"
    assert status_of(checks) == ("warn", 0)
    assert status_of(checks, fail_on_warn=True) == ("warn", 1)


def test_all_pass() -> None:
    checks = golden_checks(metrics(accuracy=1.0), gates(min_accuracy=0.9), None, "choice")
    assert status_of(checks) == ("pass", 0)
    assert status_of([]) == ("pass", 0)


def test_requirement_failure_beats_warnings() -> None:
    checks = golden_checks(
        metrics(accuracy=0.5, ece=0.3), gates(min_accuracy=0.9), gates(max_ece=0.1), "choice"
    )
    assert status_of(checks, fail_on_warn=True) == ("fail", 1)


def test_implicit_error_rate_requirement_is_appended_after_configured_gates() -> None:
    checks = golden_checks(
        metrics(error_rate=0.25, latency_p95_ms=20.0, ordinal_mae=0.1),
        gates(max_latency_p95_ms=100, max_ordinal_mae=0.3),
        gates(),
        "score",
    )
    assert [c.gate for c in checks] == ["max_latency_p95_ms", "max_ordinal_mae", "max_error_rate"]
    assert checks[2].to_dict()["threshold"] == 0.0
    assert checks[2].message == "error_rate 0.25 violates <= 0"
    assert status_of(checks) == ("fail", 1)


def test_configured_error_rate_keeps_its_table_position_and_can_be_relaxed() -> None:
    checks = golden_checks(
        metrics(error_rate=0.05, accuracy=0.95, ordinal_mae=0.0),
        gates(max_ordinal_mae=0.3, max_error_rate=0.1, min_accuracy=0.9),
        gates(),
        "score",
    )
    assert [c.gate for c in checks] == ["min_accuracy", "max_error_rate", "max_ordinal_mae"]
    assert checks[1].message == "error_rate 0.05 <= 0.1"
    assert status_of(checks) == ("pass", 0)


def test_a_gate_may_appear_at_both_levels() -> None:
    checks = golden_checks(
        metrics(accuracy=0.85), gates(min_accuracy=0.8), gates(min_accuracy=0.9), "choice"
    )
    assert [(c.gate, c.level, c.status) for c in checks] == [
        ("min_accuracy", "requirement", "pass"),
        ("max_error_rate", "requirement", "pass"),
        ("min_accuracy", "warning", "warn"),
    ]


def test_selective_gates_without_threshold_fail() -> None:
    m = metrics(accuracy=1.0)
    m["selective"] = None
    checks = golden_checks(m, gates(min_coverage=0.5), None, "choice")
    assert checks[0].status == "fail"
    assert checks[0].message == "coverage could not be computed (no eligible cases)"


def test_gate_sections_may_be_mappings() -> None:
    checks = golden_checks(metrics(brier=0.3), {"max_brier": 0.25}, {}, "noul")
    assert checks[0].message == "brier 0.3 violates <= 0.25"


def test_ordinal_mae_gate_on_a_non_score_decision_says_why_it_fails() -> None:
    checks = golden_checks(metrics(), gates(max_ordinal_mae=0.3), None, "choice")
    assert checks[0].status == "fail"
    assert checks[0].message == (
        "ordinal_mae could not be computed (ordinal_mae applies to score decisions only)"
    )


def test_make_check_reason_and_suffix() -> None:
    check = make_check(
        "paraphrase.max_violation_rate",
        "warning",
        "paraphrase.violation_rate",
        "<=",
        0,
        None,
        reason_if_null="no case could be transformed",
        suffix=" (per case: max_tv_distance 0.03)",
    )
    assert check.status == "warn"
    assert check.threshold == 0.0
    assert check.message == (
        "paraphrase.violation_rate could not be computed (no case could be transformed)"
        " (per case: max_tv_distance 0.03)"
    )


def test_message_number_formats() -> None:
    def message(value: float, comparison: str = "<=", threshold: float = 500) -> str:
        return make_check("g", "requirement", "m", comparison, threshold, value).message

    assert message(0.016294999994670434) == "m 0.01629 <= 500"
    assert message(123456.0) == "m 1.235e+05 violates <= 500"
    assert message(-0.0, threshold=0.02) == "m -0 <= 0.02"
    assert message(1.0, ">=", 0.9) == "m 1 >= 0.9"
    assert message(0.5, ">=", 1e-7) == "m 0.5 >= 1e-07"
