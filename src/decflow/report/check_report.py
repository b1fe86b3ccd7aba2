"""Loading a production check report (`decflow check`, stored as a check run) verifies it as
a run report is verified: the fields the views and the drift code read have their types,
every check follows from the stored metrics, drift and the report's own gate settings
(`config`), and the status and exit code follow from the checks. A hand-edited or
truncated report is exit 2 naming the place, never a traceback from a view.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from decflow.errors import ReportError
from decflow.gates.checks import Check, status_of
from decflow.gates.production import check_report_checks, stored_gates
from decflow.report.model import REWRITE, CheckRow, Count, Number, Open
from decflow.report.verify import close
from decflow.report.versions import REPORT_VERSIONS

Limits = dict[str, Number | None]


class _Decision(Open):
    name: str
    type: Literal["choice", "noul", "score"]
    labels: list[str] = Field(min_length=2)


class _Settings(Open):
    calibration_bins: Annotated[int, Field(ge=1, le=10_000)]
    confidence_threshold: Number | None = None


class _Config(Open):
    segments: list[str]
    requirements: Limits
    warnings: Limits
    segment_requirements: Limits
    segment_warnings: Limits


class _Records(Open):
    path: str
    hash: str
    n_records: Count


class _Confidence(Open):
    n: Count
    histogram: list[Count]


class _Metrics(Open):
    confidence: _Confidence


class _Baseline(Open):
    source: str
    n_records: Count
    metrics: _Metrics


class _Segment(Open):
    key: str
    metrics: _Metrics
    checks: list[CheckRow]
    status: Literal["pass", "warn", "fail"]


class _CheckReport(Open):
    kind: Literal["check"]
    status: Literal["pass", "warn", "fail"]
    exit_code: Annotated[int, Field(ge=0, le=2)]
    headline: str | None = None
    contract: _Decision
    evaluation: _Settings
    config: _Config
    dataset: _Records
    baseline: _Baseline | None
    metrics: _Metrics
    drift: dict[str, Number | None]
    segments: list[_Segment]
    checks: list[CheckRow]


def is_check_report(report: dict[str, Any]) -> bool:
    return report.get("kind") == "check"


def _fail(source: str, where: str, message: str) -> ReportError:
    return ReportError(f"{source}: not a valid check report: {where}: {message} ({REWRITE})")


def verify_check_report(report: dict[str, Any], source: str) -> dict[str, Any]:
    """Raise ReportError unless the check report is internally consistent; return it."""
    if report.get("report_version") not in REPORT_VERSIONS:
        raise ReportError(f"{source}: not a decflow check report (report_version "
                          f"{report.get('report_version')!r})")
    _CheckReport.read(report, source, "check report")
    try:
        aggregate, per_segment = check_report_checks(
            stored_gates(report["config"]), report["metrics"], report["drift"],
            report["segments"])
        for index, (entry, checks) in enumerate(zip(report["segments"], per_segment,
                                                    strict=True)):
            if not close(entry["checks"], [c.to_dict() for c in checks]):
                raise _fail(source, f"segments.{index}.checks",
                            "do not follow from the segment's metrics and the report's gates")
            if entry["status"] != status_of(checks)[0]:
                raise _fail(source, f"segments.{index}.status",
                            "does not follow from the segment's checks")
        expected = [c.to_dict() for c in aggregate] + [c.to_dict() for cs in per_segment
                                                       for c in cs]
        if not close(report["checks"], expected):
            raise _fail(source, "checks",
                        "do not follow from the stored metrics, drift and gate settings")
        status, exit_code = status_of([Check.from_dict(c) for c in report["checks"]])
        warn_failed = status == "warn" and report["exit_code"] == 1  # --fail-on-warn
        if report["status"] != status or (report["exit_code"] != exit_code and not warn_failed):
            raise _fail(source, "status", "does not follow from the checks")
    except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ReportError(f"{source}: not a valid check report: missing or bad {exc} "
                          f"({REWRITE})") from None
    return report
