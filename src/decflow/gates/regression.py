"""Regression gates: the contract's top-level `regression` keys are requirements, the same
keys under `regression.warnings` are warnings. Every gate is "value <= limit".

`max_error_rate_increase: 0` is an implicit requirement when the contract does not set it
(also when no contract is given). A value that cannot be computed fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from decflow.gates.checks import Check, Level, make_check

if TYPE_CHECKING:
    from decflow.contracts.gates import Regression, RegressionGates

# (gate, metric) in check order.
REGRESSION_GATES: tuple[tuple[str, str], ...] = (
    ("max_answer_flip_rate", "answer_flip_rate"),
    ("max_accuracy_drop", "accuracy_drop"),
    ("max_macro_f1_drop", "macro_f1_drop"),
    ("max_ece_increase", "ece_increase"),
    ("max_brier_increase", "brier_increase"),
    ("max_nll_increase", "nll_increase"),
    ("max_mean_tv_distance", "mean_tv_distance"),
    ("max_mean_confidence_shift", "mean_confidence_shift"),
    ("max_error_rate_increase", "error_rate_increase"),
    ("max_latency_p95_increase_ms", "latency_p95_increase_ms"),
    ("max_segment_accuracy_drop", "segment_accuracy_drop"),
)
IMPLICIT_GATE = "max_error_rate_increase"
NO_COMPARABLE = "no comparable cases"


def _negated(value: float | None) -> float | None:
    # A drop is the negated delta (so no change reads -0, as in the reference).
    return None if value is None else -value


def regression_values(diff: Mapping[str, Any]) -> tuple[dict[str, float | None], str]:
    """The value of every gate's metric, and the worst gated segment as `key=value`."""
    delta = {name: entry["delta"] for name, entry in diff["metrics"].items()}
    shift = diff["shift"]
    gated = [s for s in diff["segments"] if s["gated"] and s["accuracy_drop"] is not None]
    worst = max(gated, key=lambda s: s["accuracy_drop"], default=None)
    values = {
        "answer_flip_rate": shift["answer_flip_rate"],
        "accuracy_drop": _negated(delta["accuracy"]),
        "macro_f1_drop": _negated(delta["macro_f1"]),
        "ece_increase": delta["ece"],
        "brier_increase": delta["brier"],
        "nll_increase": delta["nll"],
        "mean_tv_distance": shift["mean_tv_distance"],
        "mean_confidence_shift": shift["mean_abs_confidence_delta"],
        "error_rate_increase": delta["error_rate"],
        "latency_p95_increase_ms": delta["latency_p95_ms"],
        "segment_accuracy_drop": None if worst is None else worst["accuracy_drop"],
    }
    return values, "" if worst is None else f"{worst['key']}={worst['value']}"


def _level_checks(
    gates: RegressionGates | None, level: Level, values: Mapping[str, float | None], worst: str
) -> list[Check]:
    checks = []
    for gate, metric in REGRESSION_GATES:
        limit = None if gates is None else getattr(gates, gate, None)
        if limit is None:
            continue
        suffix = f" (worst segment {worst})" if metric == "segment_accuracy_drop" and worst else ""
        checks.append(
            make_check(
                gate, level, metric, "<=", limit, values[metric],
                reason_if_null=NO_COMPARABLE, suffix=suffix,
            )
        )
    return checks


def regression_checks(regression: Regression | None, diff: Mapping[str, Any]) -> list[Check]:
    """Requirement checks (table order, then the implicit error-rate gate if unset), then
    warning checks. `regression` is the contract's section, or None without a contract."""
    values, worst = regression_values(diff)
    checks = _level_checks(regression, "requirement", values, worst)
    if regression is None or getattr(regression, IMPLICIT_GATE, None) is None:
        checks.append(
            make_check(
                IMPLICIT_GATE, "requirement", "error_rate_increase", "<=", 0.0,
                values["error_rate_increase"], reason_if_null=NO_COMPARABLE,
            )
        )
    warnings = None if regression is None else regression.warnings
    return checks + _level_checks(warnings, "warning", values, worst)
