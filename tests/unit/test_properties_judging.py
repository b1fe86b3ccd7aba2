"""Comparisons, violations, minimisation, summaries and checks against DecGuard 0.1.1 runs.

Originals come from the reference golden runs, transformed answers from the stored
transformed cases, so every expected value here is DecGuard's own output.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from decflow.gates.checks import status_of
from decflow.metrics.compare import Limits, compare, judge
from decflow.properties.generate import relation_of, transformed_properties
from decflow.properties.minimize import ShrinkJob, make_judge, minimize_many
from decflow.properties.summary import property_checks, property_summary
from tests.support.properties import (
    RUN_CONTRACTS,
    cases,
    configs,
    decision_type,
    golden_probabilities,
    labels,
    summaries,
    transformations,
)

POSITION_BIAS = 0.1


def _rows(run: str, name: str) -> list[dict[str, Any]]:
    return [r for r in transformations() if r["run"] == run and r["property"] == name]


def _judged(run: str, name: str) -> tuple[Any, Any, list[dict[str, Any]]]:
    example, backend = RUN_CONTRACTS[run]
    config = configs(example)[name]
    order = labels(example)
    rows = _rows(run, name)
    originals = golden_probabilities(example, backend)
    p = np.array([originals[r["case_id"]] for r in rows])
    q = np.array([[r["probabilities"][lab] for lab in order] for r in rows])
    relation = relation_of(name)
    direction = getattr(config, "direction", "increasing")
    found = compare(
        p, q, relation=relation, decision_type=decision_type(example), direction=direction
    )
    verdict = judge(
        found, Limits.of(config, relation), relation=relation, labels=order, direction=direction
    )
    return found, verdict, rows


@pytest.mark.parametrize("run", sorted(RUN_CONTRACTS))
def test_violations_match_the_stored_ones(run: str) -> None:
    example, _backend = RUN_CONTRACTS[run]
    for name in configs(example):
        _found, verdict, rows = _judged(run, name)
        assert verdict.violations == [r["violations"] for r in rows], (run, name)


def _order_sensitive_decide(candidates: list[tuple[Any, Any]]) -> list[np.ndarray | None]:
    """The refund `order_sensitive` mock: rule probabilities mixed with the first shown label."""
    order = labels("refund")
    base = golden_probabilities("refund", "default")
    by_input = {value: base[case_id] for case_id, value in cases("refund")}
    answers: list[np.ndarray | None] = []
    for new_input, presentation in candidates:
        first = presentation[0][1] if presentation else order[0]
        bias = np.array([POSITION_BIAS if lab == first else 0.0 for lab in order])
        answers.append((1 - POSITION_BIAS) * np.array(by_input[new_input]) + bias)
    return answers


def test_fake_mock_reproduces_the_stored_answers() -> None:
    rows = _rows("refund-order_sensitive-seed42", "option_order")
    for row, q in zip(
        rows, _order_sensitive_decide([(r["input"], r["presentation"]) for r in rows]), strict=True
    ):
        stored = [row["probabilities"][lab] for lab in labels("refund")]
        np.testing.assert_allclose(q, stored, rtol=0, atol=1e-15)


def _shrink(run: str, name: str, decide: Any) -> list[Any]:
    example, backend = RUN_CONTRACTS[run]
    config = configs(example)[name]
    originals = golden_probabilities(example, backend)
    inputs = dict(cases(example))
    rule = make_judge(
        config, relation_of(name), decision_type(example), labels(example), "increasing"
    )
    failing = [r for r in _rows(run, name) if r["violations"]]
    jobs = [
        ShrinkJob(name, r["steps"], inputs[r["case_id"]], np.array(originals[r["case_id"]]), rule)
        for r in failing
    ]
    results = minimize_many(jobs, decide, labels=labels(example), text_field=None, max_calls=32)
    return list(zip(failing, results, strict=True))


def test_minimisation_reduces_exactly_as_the_reference() -> None:
    shrunk = _shrink("refund-order_sensitive-seed42", "option_order", _order_sensitive_decide)
    assert len(shrunk) == 27
    for row, result in shrunk:
        got = result.reduced["steps"] if result.reduced else None
        assert got == row["reduced_steps"], row["id"]
    example = {row["id"]: result for row, result in shrunk}["option_order/r1/2"]
    # The reference's worked example: [2,1,0] → [1,2,0] → minimal [1,0,2] in two calls.
    assert example.reduced["backend_calls"] == 2
    assert example.reduced["presentation"] == [
        ("reject", "reject"),
        ("refund", "refund"),
        ("review", "review"),
    ]
    assert example.reduced["violations"] == ["tv_distance 0.1 > 0.03"]


def test_minimisation_respects_the_call_budget_and_ignores_errors() -> None:
    shrunk = _shrink("refund-order_sensitive-seed42", "option_order", lambda c: [None] * len(c))
    assert all(result.reduced is None for _row, result in shrunk)
    assert max(result.backend_calls for _row, result in shrunk) <= 32
    row = next(
        r
        for r in _rows("refund-order_sensitive-seed42", "option_order")
        if r["id"] == "option_order/r1/2"
    )
    originals = golden_probabilities("refund", "order_sensitive")
    config = configs("refund")["option_order"]
    rule = make_judge(config, "invariant", "choice", labels("refund"), "increasing")
    job = ShrinkJob("option_order", row["steps"], row["input"], np.array(originals["r1"]), rule)
    (one,) = minimize_many(
        [job], _order_sensitive_decide, labels=labels("refund"), text_field=None, max_calls=1
    )
    assert one.backend_calls == 1
    assert one.reduced is not None and one.reduced["steps"] == [{"order": [1, 2, 0]}]


@pytest.mark.parametrize("run", sorted(RUN_CONTRACTS))
def test_summaries_checks_and_exit_code_match(run: str) -> None:
    example, _backend = RUN_CONTRACTS[run]
    reference = summaries(run)
    produced: list[dict[str, Any]] = []
    checks = []
    reduced = defaultdict(int)
    for row in transformations():
        if row["run"] == run and row["reduced_steps"] is not None:
            reduced[row["property"]] += 1
    for name in transformed_properties():
        config = configs(example).get(name)
        if config is None:
            continue
        found, verdict, rows = _judged(run, name)
        summary = property_summary(
            name,
            level=config.level,
            relation=relation_of(name),
            n_cases=len(cases(example)),
            n_skipped=0,
            error_kinds=[None] * len(rows),
            comparison=found,
            judgement=verdict,
            n_reduced=reduced[name],
            direction=getattr(config, "direction", "increasing"),
        )
        produced.append(summary)
        checks.extend(property_checks(summary, name, config, relation_of(name)))
    assert produced == reference["summaries"]
    assert [list(s) for s in produced] == [list(s) for s in reference["summaries"]]
    assert [c.to_dict() for c in checks] == reference["checks"]
    assert status_of(checks) == (reference["status"], reference["exit_code"])
