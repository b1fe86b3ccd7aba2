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

    # 10 cases, one variant each, 0 violating, 0 flips; max_violation_rate 0, max_flip_rate 0.2.
    summary = _summary([None] * 10)
    checks = property_checks(summary, "whitespace", CONFIG, "invariant")
    assert [c.status for c in checks] == ["pass", "pass", "pass"]  # DecGuard verdicts kept
    cases = [f"c{i}" for i in range(10)]
    none = np.zeros(10, dtype=bool)
    violation, flip = rate_evidence("whitespace", CONFIG, "invariant", cases, none, none)
    # Limit 0 is a count: "0 of 10 cases", exact upper bound 1 − 0.05^(1/10) = 0.259.
    assert violation["gate"] == "whitespace.max_violation_rate"
    assert violation["statement"] == "0 of 10 variants over 10 cases, upper bound 0.259"
    assert violation["evidence"]["verdict"] == "holds" and not violation["underpowered"]
    # Limit 0.2: DecGuard passes 0/10, but the exact upper bound 0.259 is above 0.2:
    # underpowered; 0 of n shows it below 0.2 from n = ⌈ln 0.05 / ln 0.8⌉ = 14 cases.
    assert flip["underpowered"] and flip["cases_needed"] == 14
    assert flip["evidence"]["notes"] == ["underpowered"]
    assert flip["statement"].startswith("underpowered: 0 of 10 variants over 10 cases")


def test_rate_evidence_counts_cases_not_variants() -> None:
    from decflow.properties.summary import rate_evidence

    # Six option_order variants per case, ten cases; one case violates in all six variants.
    # As 60 independent variants 6/60 = 0.1; per case the share is 1 in one case of ten.
    cases = [f"c{i}" for i in range(10) for _ in range(6)]
    hits = np.array([i < 6 for i in range(60)])
    config = property_config("whitespace", max_tv_distance=0.1, max_violation_rate=0.5)
    (violation,) = rate_evidence("whitespace", config, "invariant", cases, hits, hits)
    assert (violation["count"], violation["variants"], violation["n"]) == (6, 60, 10)
    assert violation["evidence"]["method"].startswith("Bentkus")
    assert violation["evidence"]["n"] == 10
    # A limit-0 gate with one violating case fails whatever the number of variants.
    zero = property_config("whitespace", max_tv_distance=0.1)
    (counted,) = rate_evidence("whitespace", zero, "invariant", cases, hits, hits)
    assert counted["evidence"]["verdict"] == "fails"
    assert rate_evidence("whitespace", CONFIG, "invariant", [], none_of(0), none_of(0)) == []


def none_of(n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool)
