"""Checks: one gate judged against one metric value, and the overall verdict.

Shared by golden, property, regression and production gates so every check reads the same
way: ``<metric> <value %.4g> <op> <threshold %g>``, ``<metric> <value> violates <op>
<threshold>`` or ``<metric> could not be computed (<reason>)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

Level = Literal["requirement", "warning"]
Comparison = Literal[">=", "<=", "<"]
CheckStatus = Literal["pass", "warn", "fail"]

NO_ELIGIBLE_CASES = "no eligible cases"


@dataclass(frozen=True)
class Check:
    gate: str
    level: Level
    metric: str
    comparison: Comparison
    threshold: float
    value: float | None
    status: CheckStatus
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object (keys in report order)."""
        return asdict(self)


def _holds(value: float, comparison: Comparison, threshold: float) -> bool:
    if comparison == ">=":
        return value >= threshold
    if comparison == "<=":
        return value <= threshold
    if comparison == "<":
        return value < threshold
    raise ValueError(f"unknown comparison {comparison!r}")


def make_check(
    gate: str,
    level: Level,
    metric: str,
    comparison: Comparison,
    threshold: float,
    value: float | None,
    *,
    reason_if_null: str = NO_ELIGIBLE_CASES,
    suffix: str = "",
) -> Check:
    """Judge ``value <comparison> threshold``. A missing value fails: the gate was not
    demonstrated. A failure is ``fail`` at requirement level and ``warn`` at warning level.
    ``suffix`` is appended verbatim to the message (property checks pass
    ``" (per case: max_tv_distance 0.03)"``)."""
    threshold = float(threshold)
    if value is None:
        holds = False
        message = f"{metric} could not be computed ({reason_if_null})"
    else:
        value = float(value)
        holds = _holds(value, comparison, threshold)
        verb = "" if holds else "violates "
        message = f"{metric} {value:.4g} {verb}{comparison} {threshold:g}"
    failed: CheckStatus = "fail" if level == "requirement" else "warn"
    return Check(
        gate=gate,
        level=level,
        metric=metric,
        comparison=comparison,
        threshold=threshold,
        value=value,
        status="pass" if holds else failed,
        message=message + suffix,
    )


def status_of(checks: Iterable[Check], *, fail_on_warn: bool = False) -> tuple[CheckStatus, int]:
    """Overall status and exit code: fail (1) if any requirement fails, else warn (0, or 1
    with ``fail_on_warn``) if any warning fails, else pass (0)."""
    statuses = {check.status for check in checks}
    if "fail" in statuses:
        return "fail", 1
    if "warn" in statuses:
        return "warn", 1 if fail_on_warn else 0
    return "pass", 0
