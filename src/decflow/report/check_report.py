"""Loading a production check report (`decflow check`, stored as a check run) verifies it as
a run report is verified: the fields the views and the drift code read have their types,
every check follows from the stored metrics, drift and the report's own gate settings
(`config`), and the status and exit code follow from the checks. A hand-edited or
truncated report is exit 2 naming the place, never a traceback from a view. Only verdicts
are re-derived, never prose or planning figures, so older runs still show and re-gate.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from decflow.errors import ReportError
from decflow.gates.checks import Check, Verdict, status_of
from decflow.report.model import (
    REWRITE,
    Bins,
    Calibration,
    CheckRow,
    ContractRef,
    Count,
    DatasetRef,
    DecisionType,
    Evaluation,
    ExitCode,
    MaybePerCase,
    Number,
    Open,
    Report,
)
from decflow.report.versions import REPORT_VERSIONS

Limits = dict[str, Number | None]


class CheckContract(ContractRef):
    name: str
    type: DecisionType
    labels: list[str] = Field(min_length=2)


class CheckEvaluation(Evaluation):
    calibration_bins: Bins


class CheckConfig(Open):
    segments: list[str]
    requirements: Limits
    warnings: Limits
    segment_requirements: Limits
    segment_warnings: Limits
    # decflow/4: `evidence` when the gates were judged by evidence; absent, point estimates
    gating: Literal["evidence"] | None = None


class Records(DatasetRef):
    path: str
    hash: str
    n_records: Count


class RecordCounts(Open):
    total: Count
    with_outcome: Count
    with_correctness: Count
    with_action: Count
    with_fallback: Count
    with_latency: Count
    with_cost: Count


class Outcomes(Open):
    n: Count
    accuracy: Number | None
    error_rate: Number | None


class CheckCalibration(Open):
    n: Count
    ece: Number | None
    n_label_outcomes: Count
    brier: Number | None
    nll: Number | None
    bins: Bins
    reliability: list[dict[str, Any]]


class ConfidenceCounts(Open):
    n: Count
    mean: Number | None = None
    p50: Number | None = None
    p95: Number | None = None
    histogram: list[Count]


class Threshold(Open):
    threshold: Number
    n: Count
    coverage: Number | None


class Routing(Open):
    n_actions: Count
    abstention_rate: Number | None
    human_review_rate: Number | None
    n_fallback: Count
    fallback_rate: Number | None


class Spread(Open):
    """Latency or cost over the records that report it."""

    n: Count
    mean: Number | None
    p95: Number | None
    total: Number | None = None


class CheckMetrics(Open):
    """A check's (or a segment's, or a baseline's) metrics, DecGuard 0.1's groups."""

    counts: RecordCounts
    outcomes: Outcomes
    calibration: CheckCalibration
    confidence: ConfidenceCounts
    threshold: Threshold | None = None
    routing: Routing
    latency_ms: Spread
    cost: Spread


class Drift(Open):
    """The check's drift against its baseline (every value None without one)."""

    confidence_tv_distance: Number | None = None
    confidence_mean_delta: Number | None = None
    accuracy_drop: Number | None = None
    ece_increase: Number | None = None


class Percentiles(Open):
    """How the percentiles were computed: exactly up to `exact_up_to` values per group,
    else from a sketch (`sketched` names them) within `relative_error`."""

    sketched: list[str]
    exact_up_to: Count
    relative_error: Number


class CheckBaseline(Open):
    source: str
    n_records: Count
    metrics: CheckMetrics
    calibration: Calibration | None = None


class Segment(Open):
    key: str
    value: Any
    metrics: CheckMetrics
    checks: list[CheckRow]
    status: Verdict


class CheckView(Report):
    """What the views read of a check report: its metric groups, drift and segments (typed:
    a misspelled key is a type error), and what a decflow check adds when it has it (the
    baseline, calibration, percentile method); DecGuard's reports carry the groups only."""

    metrics: CheckMetrics
    drift: Drift
    segments: list[Segment]
    baseline: CheckBaseline | None = None
    calibration: Calibration | None = None
    percentiles: Percentiles | None = None


class CheckReport(CheckView):
    """A production check's report (`decflow check`, a check run)."""

    kind: Literal["check"]
    status: Verdict
    exit_code: ExitCode
    contract: CheckContract
    evaluation: CheckEvaluation
    config: CheckConfig
    dataset: Records
    baseline: CheckBaseline | None
    checks: list[CheckRow]
    records: MaybePerCase = None  # inline when there are few (`INLINE_RECORDS`)


def verify_check_report(report: dict[str, Any], source: str, *, advice: str = REWRITE,
                        verdicts: bool = True) -> CheckReport:
    """Raise ReportError unless the check report has its shape and (unless `verdicts` is
    False: a caller that judges it again) every check's verdict follows from the stored
    metrics, drift and the report's own gate settings, each segment's status from its checks
    and the report's status and exit code from all; return it typed. Messages and planning
    figures are not compared (`verdicts_of`): an older run's wording still reads."""
    if report.get("report_version") not in REPORT_VERSIONS:
        raise ReportError(f"{source}: not a decflow check report (report_version "
                          f"{report.get('report_version')!r})")
    typed = CheckReport.read(report, source, "check report", advice=advice)
    if not verdicts:
        return typed
    # imported here, not at the top: every view imports this module for its models, and a
    # contract run would otherwise load the production gates, their metrics and pyarrow
    from decflow.gates.production import stored_gates
    from decflow.gates.production_evidence import check_report_checks, stored_gating
    from decflow.report.verify import close, verdicts_of

    def _fail(where: str, message: str) -> ReportError:
        return ReportError(f"{source}: not a valid check report: {where}: {message} ({advice})")

    try:
        baseline = report["baseline"]
        aggregate, per_segment = check_report_checks(
            stored_gates(report["config"]), report["metrics"], report["drift"],
            report["segments"], gating=stored_gating(report["config"]),
            baseline=None if baseline is None else baseline["metrics"])
        for index, (entry, checks) in enumerate(zip(report["segments"], per_segment,
                                                    strict=True)):
            if not close(verdicts_of(entry["checks"]), verdicts_of(c.to_dict() for c in checks)):
                raise _fail(f"segments.{index}.checks",
                            "do not follow from the segment's metrics and the report's gates")
            if entry["status"] != status_of(checks)[0]:
                raise _fail(f"segments.{index}.status",
                            "does not follow from the segment's checks")
        expected = [c.to_dict() for c in aggregate] + [c.to_dict() for cs in per_segment
                                                       for c in cs]
        if not close(verdicts_of(report["checks"]), verdicts_of(expected)):
            raise _fail("checks",
                        "do not follow from the stored metrics, drift and gate settings")
        status, exit_code = status_of([Check.from_dict(c) for c in report["checks"]])
        warn_failed = status == "warn" and report["exit_code"] == 1  # --fail-on-warn
        if report["status"] != status or (report["exit_code"] != exit_code and not warn_failed):
            raise _fail("status", "does not follow from the checks")
    except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ReportError(f"{source}: not a valid check report: missing or bad {exc} "
                          f"({advice})") from None
    return typed
