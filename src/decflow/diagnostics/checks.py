"""Check records for diagnostic gates, in the same shape as every other gate's check.

Keys and order follow the golden and property checks: gate, level, metric, comparison,
threshold, value, status, message. Numbers in messages use DecGuard's formatting (values
``%.4g``, thresholds ``%g``) so diagnostic checks read like the rest of the report.
"""

from __future__ import annotations

from typing import Any, Literal

Level = Literal["requirement", "warning"]


def fmt_value(value: float) -> str:
    return f"{value:.4g}"


def fmt_threshold(value: float) -> str:
    return f"{value:g}"


def diagnostic_check(
    *,
    gate: str,
    level: Level,
    metric: str,
    comparison: str,
    threshold: float,
    value: float | None,
    passed: bool,
    message: str,
) -> dict[str, Any]:
    return {
        "gate": gate,
        "level": level,
        "metric": metric,
        "comparison": comparison,
        "threshold": threshold,
        "value": value,
        "status": "pass" if passed else "fail",
        "message": message,
    }
