"""Property checks for properties that evaluated nothing, errored, or were not run."""

from __future__ import annotations

import numpy as np

from decflow.metrics.compare import Limits, compare, judge
from decflow.properties.summary import property_checks, property_summary
from tests.support.properties import property_config


def _summary(kinds: list[str | None], n_skipped: int = 0) -> dict:
    n = sum(k is None for k in kinds)
    p = np.tile([0.7, 0.3], (n, 1))
    found = compare(p, p, relation="invariant", decision_type="noul")
    verdict = judge(found, Limits(max_tv_distance=0.1), relation="invariant", labels=["a", "b"])
    return property_summary(
        "whitespace",
        level="warning",
        relation="invariant",
        n_cases=4,
        n_skipped=n_skipped,
        error_kinds=kinds,
        comparison=found,
        judgement=verdict,
        n_reduced=0,
    )


CONFIG = property_config("whitespace", level="warning", max_tv_distance=0.1, max_flip_rate=0.2)


def test_all_skipped_fails_the_error_rate_check() -> None:
    summary = _summary([], n_skipped=4)
    assert summary["violation_rate"] is None and summary["mean_tv_distance"] is None
    checks = [c.to_dict() for c in property_checks(summary, "whitespace", CONFIG, "invariant")]
    assert checks[0] == {
        "gate": "whitespace.max_error_rate",
        "level": "requirement",
        "metric": "whitespace.error_rate",
        "comparison": "<=",
        "threshold": 0.0,
        "value": None,
        "status": "fail",
        "message": "whitespace.error_rate could not be computed (no case could be transformed)",
    }
    assert [c["status"] for c in checks[1:]] == ["warn", "warn"]
    assert checks[1]["message"].endswith("(per case: max_tv_distance 0.1)")


def test_a_property_that_did_not_run() -> None:
    (error, *_rest) = property_checks(None, "whitespace", CONFIG, "invariant")
    assert error.status == "fail"
    assert error.message == "whitespace.error_rate could not be computed (the property was not run)"


def test_errors_count_in_the_error_rate_and_by_kind() -> None:
    summary = _summary([None, "timeout", None, "original_error"])
    assert summary["n_transformed"] == 4 and summary["n_evaluated"] == 2
    assert summary["errors_by_kind"] == {"original_error": 1, "timeout": 1}
    assert list(summary["errors_by_kind"]) == ["original_error", "timeout"]
    error, violations, flips = property_checks(summary, "whitespace", CONFIG, "invariant")
    assert error.value == 0.5 and error.status == "fail"
    assert error.message == "whitespace.error_rate 0.5 violates <= 0"
    assert violations.level == "warning" and violations.status == "pass"
    assert violations.message == "whitespace.violation_rate 0 <= 0 (per case: max_tv_distance 0.1)"
    assert flips.message == "whitespace.flip_rate 0 <= 0.2"


def test_monotonic_always_has_a_violation_rate_check() -> None:
    config = property_config("monotonic", field="n")
    names = [c.gate for c in property_checks(None, "monotonic", config, "monotonic")]
    assert names == ["monotonic.max_error_rate", "monotonic.max_violation_rate"]


def test_rate_evidence_beside_the_unchanged_checks() -> None:
    from decflow.properties.summary import rate_evidence

    # 10 compared, 0 violating, 0 flips; max_violation_rate 0 and max_flip_rate 0.2.
    summary = _summary([None] * 10)
    checks = property_checks(summary, "whitespace", CONFIG, "invariant")
    assert [c.status for c in checks] == ["pass", "pass", "pass"]  # DecGuard verdicts kept
    violation, flip = rate_evidence(summary, "whitespace", CONFIG, "invariant")
    # Limit 0: Wilson 0/10 upper bound z²/(n + z²) = 3.8416/13.8416 = 0.2775.
    assert violation["gate"] == "whitespace.max_violation_rate"
    assert violation["statement"] == "0 of 10, upper bound 0.278"
    assert not violation["underpowered"]
    # Limit 0.2: DecGuard passes 0/10, but the upper bound 0.278 is above 0.2: underpowered;
    # n* = ⌊1.96²·0.2·0.8/0.2²⌋ + 1 = ⌊15.37⌋ + 1 = 16 compared cases.
    assert flip["underpowered"] and flip["cases_needed"] == 16
    assert flip["statement"].startswith("underpowered: 0 of 10, upper bound 0.278 > 0.2")


def test_rate_evidence_of_a_failing_and_a_well_powered_rate() -> None:
    from decflow.properties.summary import rate_evidence

    summary = {**_summary([None] * 10), "n_flips": 3, "flip_rate": 0.3}
    (_, failing) = rate_evidence(summary, "whitespace", CONFIG, "invariant")
    # Wilson 3/10: centre 0.35551, margin 0.24772.
    assert failing["statement"] == "3 of 10, 95% CI [0.108, 0.603]"
    assert not failing["underpowered"]
    many = {**_summary([None] * 40), "n_flips": 1}
    (_, powered) = rate_evidence(many, "whitespace", CONFIG, "invariant")
    # Wilson 1/40 upper bound 0.129 < 0.2.
    assert powered["statement"] == "1 of 40, upper bound 0.129 < 0.2"
    assert rate_evidence(None, "whitespace", CONFIG, "invariant") == []
