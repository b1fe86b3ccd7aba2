"""Evidence beside DecGuard's golden rate gates: exact binomial bounds, *underpowered* passes,
limit-0 counts; DecGuard's verdict is reported as it is."""

from __future__ import annotations

import pytest

from decflow.contracts.gates import GoldenGates, golden_gates_model
from decflow.gates.golden_evidence import golden_gate_evidence


def gates(**limits: float) -> GoldenGates:
    return golden_gates_model()(**limits)


def metrics(correct: int, labeled: int, errored: int, total: int) -> dict:
    return {"classification": {"accuracy": correct / labeled, "n": labeled},
            "counts": {"error_rate": errored / total, "total": total}, "selective": None}


def test_a_pass_on_few_cases_is_underpowered_with_the_cases_needed() -> None:
    (accuracy, errors) = golden_gate_evidence(metrics(10, 10, 0, 10), gates(min_accuracy=0.9),
                                              gates())
    assert accuracy["decguard"] == "pass" and accuracy["evidence"]["notes"] == ["underpowered"]
    # 10 of 10: the exact lower bound is 0.05^(1/10) = 0.741, below 0.9; 29 of 29 clears it
    # (0.05^(1/29) = 0.902).
    assert accuracy["evidence"]["low"] == pytest.approx(0.05 ** 0.1)
    assert accuracy["evidence"]["cases_needed"] == 29
    # The implicit max_error_rate: 0 is a count: 0 of 10 holds, upper bound 1 − 0.05^(1/10).
    assert errors["gate"] == "max_error_rate" and errors["evidence"]["verdict"] == "holds"
    assert errors["evidence"]["high"] == pytest.approx(1 - 0.05 ** 0.1)


def test_enough_cases_establish_the_pass_and_one_error_fails_a_limit_zero() -> None:
    (accuracy, errors) = golden_gate_evidence(metrics(95, 100, 1, 100), gates(min_accuracy=0.8),
                                              gates())
    assert accuracy["evidence"]["verdict"] == "holds" and "notes" not in accuracy["evidence"]
    assert errors["decguard"] == "fail" and errors["evidence"]["verdict"] == "fails"
