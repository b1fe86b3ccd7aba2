"""Checks: one gate judged against one metric value, and the overall verdict.

Shared by golden, property, regression, production and diagnostic gates so every check reads
the same way: ``<metric> <value %.4g> <op> <threshold %g>``, ``<metric> <value> violates <op>
<threshold>`` or ``<metric> could not be computed (<reason>)``.

Statuses: ``pass``; ``fail`` (a requirement does not hold); ``warn`` (a warning does not
hold); ``not_established`` (an evidence gate whose evidence decides neither way, at any
level: shown as WARN, never a pass). DecGuard's point-estimate gates are judged by
`make_check`; decflow's inferential verdicts by `evidence_check`, from an `Evidence` record
whose one-sided 95 % bounds decide (docs/statistics.md, "level convention"). `Evidence` is
defined in `decflow.metrics.evidence` (the inference core produces it) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from decflow.metrics.evidence import Evidence

Level = Literal["requirement", "warning"]
Comparison = Literal[">=", "<=", "<"]
CheckStatus = Literal["pass", "warn", "fail", "not_established"]
Verdict = Literal["pass", "warn", "fail"]  # a report's status: never not_established

NO_ELIGIBLE_CASES = "no eligible cases"
PER_SIDE = "95% per side"  # the level convention's one-sided bounds
NOT_ESTABLISHED = "not_established"


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
    evidence: Evidence | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object (keys in report order; ``evidence`` only when set, so
        DecGuard-parity checks keep DecGuard's keys)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "evidence"}
        if self.evidence is not None:
            out["evidence"] = self.evidence.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        """A check read back from a report's JSON object (unknown keys ignored)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("evidence") is not None:
            values["evidence"] = Evidence.from_dict(values["evidence"])
        return cls(**values)


def _holds(value: float, comparison: Comparison, threshold: float) -> bool:
    if comparison == ">=":
        return value >= threshold
    if comparison == "<=":
        return value <= threshold
    if comparison == "<":
        return value < threshold
    raise ValueError(f"unknown comparison {comparison!r}")


def _failed(level: Level) -> CheckStatus:
    return "fail" if level == "requirement" else "warn"


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
    """Judge ``value <comparison> threshold`` (DecGuard's point-estimate rule). A missing
    value fails: the gate was not demonstrated. A failure is ``fail`` at requirement level
    and ``warn`` at warning level. ``suffix`` is appended verbatim to the message (property
    checks pass ``" (per case: max_tv_distance 0.03)"``). Evidence shown beside such a
    verdict is added with ``dataclasses.replace(check, evidence=…)``: it never changes it."""
    threshold = float(threshold)
    if value is None:
        holds = False
        message = f"{metric} could not be computed ({reason_if_null})"
    else:
        value = float(value)
        holds = _holds(value, comparison, threshold)
        verb = "" if holds else "violates "
        message = f"{metric} {value:.4g} {verb}{comparison} {threshold:g}"
    return Check(
        gate=gate,
        level=level,
        metric=metric,
        comparison=comparison,
        threshold=threshold,
        value=value,
        status="pass" if holds else _failed(level),
        message=message + suffix,
    )


def interval_text(evidence: Evidence) -> str:
    """``[low, high]`` (one-sided 95 % bounds, i.e. a 90 % interval), or ``''``."""
    if evidence.low is None or evidence.high is None:
        return ""
    return f"[{evidence.low:.4g}, {evidence.high:.4g}]"


def undecided_note(evidence: Evidence) -> str:
    """``not established: about N cases needed; detects ≥ X at 80% power`` (parts known)."""
    parts = []
    if evidence.cases_needed is not None:
        parts.append(f"about {evidence.cases_needed} cases needed")
    if evidence.detectable is not None:
        parts.append(f"detects ≥ {evidence.detectable:.3g} at 80% power")
    return "not established" + (": " + "; ".join(parts) if parts else "")


def evidence_check(
    gate: str,
    level: Level,
    metric: str,
    comparison: Comparison,
    threshold: float,
    evidence: Evidence,
    *,
    suffix: str = "",
    bounds: str = PER_SIDE,
) -> Check:
    """A tri-state check: the evidence shows the gate holds → pass; shows it does not →
    fail (requirement) or warn (warning); otherwise not_established. ``value`` is the
    estimate; the message reads like `make_check`'s, then the interval labelled with what
    its bounds are (`bounds`: one-sided 95 % by default; a sequential run's are time-uniform
    at its α per gate) and, when undecided, the cases needed and the detectable effect."""
    threshold = float(threshold)
    status: CheckStatus = {
        "holds": "pass", "fails": _failed(level), "not_established": NOT_ESTABLISHED,
    }[evidence.verdict]  # type: ignore[assignment]
    estimate = evidence.estimate
    shown = "n/a" if estimate is None else f"{estimate:.4g}"
    verb = "violates " if evidence.verdict == "fails" else ""
    message = f"{metric} {shown} {verb}{comparison} {threshold:g}"
    interval = interval_text(evidence)
    if interval:
        message += f" {interval} ({bounds}, n={evidence.n})"
    if evidence.verdict == "not_established":
        message += f"; {undecided_note(evidence)}"
    return Check(
        gate=gate,
        level=level,
        metric=metric,
        comparison=comparison,
        threshold=threshold,
        value=estimate,
        status=status,
        message=message + suffix,
        evidence=evidence,
    )


def status_of(checks: Iterable[Check], *, fail_on_warn: bool = False) -> tuple[Verdict, int]:
    """Overall status and exit code: fail (1) if any requirement fails, else warn (0, or 1
    with ``fail_on_warn``) if any warning fails or any check is not established, else pass
    (0)."""
    statuses = {check.status for check in checks}
    if "fail" in statuses:
        return "fail", 1
    if "warn" in statuses or NOT_ESTABLISHED in statuses:
        return "warn", 1 if fail_on_warn else 0
    return "pass", 0
