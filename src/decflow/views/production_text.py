"""The terminal view of a production check, in DecGuard's `check` shape.

Additions over DecGuard's view: the dataset line, latency and cost lines (DecGuard only
has them in the JSON), and warning-level checks are tagged `(warning)`.
"""

from __future__ import annotations

from decflow.gates.headline import number
from decflow.report.check_report import CheckMetrics, CheckView, Percentiles
from decflow.report.model import ContractRef, DatasetRef
from decflow.untrusted import escape
from decflow.version import __version__
from decflow.views.calibration_text import calibration_lines
from decflow.views.text import WARN_VERDICT, checks, failing_segments_first, short_hash

VERDICTS = {
    "pass": "PASS: all post-deployment gates hold",
    "warn": WARN_VERDICT,
    "fail": "FAIL: at least one post-deployment requirement does not hold",
}
GATE_WIDTH = 48


def _metric_lines(metrics: CheckMetrics) -> list[str]:
    counts, outcomes = metrics.counts, metrics.outcomes
    calibration, confidence, routing = metrics.calibration, metrics.confidence, metrics.routing
    lines = [
        f"  Records       {counts.total} total · {counts.with_correctness} with "
        f"correctness · {counts.with_outcome} with label outcome",
        f"  Outcomes      accuracy {number(outcomes.accuracy)} · "
        f"error {number(outcomes.error_rate)}",
        f"  Calibration   ECE {number(calibration.ece)} · Brier {number(calibration.brier)} · "
        f"NLL {number(calibration.nll)}",
        f"  Confidence    mean {number(confidence.mean)} · p50 {number(confidence.p50)} · "
        f"p95 {number(confidence.p95)}",
    ]
    threshold = metrics.threshold
    if threshold is not None:
        lines.append(
            f"  Threshold     confidence >= {threshold.threshold:g}: "
            f"coverage {number(threshold.coverage)}"
        )
    lines.append(
        f"  Routing       abstain {number(routing.abstention_rate)} · "
        f"fallback {number(routing.fallback_rate)} · "
        f"review {number(routing.human_review_rate)}"
    )
    latency, cost = metrics.latency_ms, metrics.cost
    if latency.n:
        lines.append(f"  Latency ms    mean {number(latency.mean)} · p95 {number(latency.p95)}")
    if cost.n:
        lines.append(
            f"  Cost          mean {number(cost.mean)} · p95 {number(cost.p95)} · "
            f"total {number(cost.total)}"
        )
    return lines


def _baseline_lines(report: CheckView) -> list[str]:
    baseline, drift = report.baseline, report.drift
    if baseline is None:
        return []
    return [
        "",
        f"  Baseline      {baseline.source} · {baseline.n_records} records",
        f"  Drift         confidence TV {number(drift.confidence_tv_distance)} · "
        f"mean delta {number(drift.confidence_mean_delta)} · "
        f"accuracy drop {number(drift.accuracy_drop)} · "
        f"ECE increase {number(drift.ece_increase)}",
    ]


def _segment_lines(report: CheckView) -> list[str]:
    if not report.segments:
        return []
    lines = ["", "  Segments"]
    for segment in failing_segments_first(report.segments):
        shown = "<missing>" if segment.value is None else str(segment.value)
        metrics = segment.metrics
        lines.append(
            f"    {segment.status.upper()} {segment.key}={shown} · "
            f"{metrics.counts.total} records · "
            f"accuracy {number(metrics.outcomes.accuracy)} · "
            f"ECE {number(metrics.calibration.ece)}"
        )
    return lines


def _percentile_lines(method: Percentiles | None) -> list[str]:
    """Said only when a sketch gave some percentiles (otherwise they are exact)."""
    if method is None or not method.sketched:
        return []
    return [
        f"  Percentiles   {len(method.sketched)} from a sketch (beyond "
        f"{method.exact_up_to:,} values per group): within "
        f"{100 * method.relative_error:g} % of the exact value"
    ]


def render_check(typed: CheckView) -> str:
    """The whole text view, ending with the verdict line and a newline."""
    contract, dataset = typed.contract or ContractRef(), typed.dataset or DatasetRef()
    lines = [
        typed.first_line(),
        f"decflow {__version__} · {contract.name} ({contract.type}) · "
        f"{str(typed.status).upper()}",
        "",
        f"  dataset   {dataset.path}  {short_hash(dataset.hash)}",
        "",
        *_metric_lines(typed.metrics),
        *(f"                {line}" for line in calibration_lines(typed.calibration)),
        *_percentile_lines(typed.percentiles),
        *_baseline_lines(typed),
        *_segment_lines(typed),
        *checks(typed, GATE_WIDTH),
        "",
        VERDICTS[str(typed.status)],
    ]
    # Segment values and paths come from the records: shown escaped, one line each.
    return "\n".join(escape(line) for line in lines) + "\n"
