"""The terminal view of a production check, in DecGuard's `check` shape.

Additions over DecGuard's view: the dataset line, latency and cost lines (DecGuard only
has them in the JSON), and warning-level checks are tagged `(warning)`.
"""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import number
from decflow.report.model import ContractRef, DatasetRef, Report
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


def _metric_lines(metrics: dict[str, Any]) -> list[str]:
    counts, outcomes = metrics["counts"], metrics["outcomes"]
    calibration, confidence = metrics["calibration"], metrics["confidence"]
    routing = metrics["routing"]
    lines = [
        f"  Records       {counts['total']} total · {counts['with_correctness']} with "
        f"correctness · {counts['with_outcome']} with label outcome",
        f"  Outcomes      accuracy {number(outcomes['accuracy'])} · "
        f"error {number(outcomes['error_rate'])}",
        f"  Calibration   ECE {number(calibration['ece'])} · "
        f"Brier {number(calibration['brier'])} · "
        f"NLL {number(calibration['nll'])}",
        f"  Confidence    mean {number(confidence['mean'])} · p50 {number(confidence['p50'])} · "
        f"p95 {number(confidence['p95'])}",
    ]
    threshold = metrics.get("threshold")
    if threshold is not None:
        lines.append(
            f"  Threshold     confidence >= {threshold['threshold']:g}: "
            f"coverage {number(threshold['coverage'])}"
        )
    lines.append(
        f"  Routing       abstain {number(routing['abstention_rate'])} · "
        f"fallback {number(routing['fallback_rate'])} · "
        f"review {number(routing['human_review_rate'])}"
    )
    latency, cost = metrics["latency_ms"], metrics["cost"]
    if latency["n"]:
        lines.append(
            f"  Latency ms    mean {number(latency['mean'])} · p95 {number(latency['p95'])}"
        )
    if cost["n"]:
        lines.append(
            f"  Cost          mean {number(cost['mean'])} · p95 {number(cost['p95'])} · "
            f"total {number(cost['total'])}"
        )
    return lines


def _baseline_lines(report: dict[str, Any]) -> list[str]:
    baseline = report.get("baseline")
    if baseline is None:
        return []
    drift = report["drift"]
    return [
        "",
        f"  Baseline      {baseline['source']} · {baseline['n_records']} records",
        f"  Drift         confidence TV {number(drift['confidence_tv_distance'])} · "
        f"mean delta {number(drift['confidence_mean_delta'])} · "
        f"accuracy drop {number(drift['accuracy_drop'])} · "
        f"ECE increase {number(drift['ece_increase'])}",
    ]


def _segment_lines(report: dict[str, Any]) -> list[str]:
    if not report["segments"]:
        return []
    lines = ["", "  Segments"]
    for segment in failing_segments_first(report["segments"]):
        value = segment["value"]
        shown = "<missing>" if value is None else str(value)
        metrics = segment["metrics"]
        lines.append(
            f"    {segment['status'].upper()} {segment['key']}={shown} · "
            f"{metrics['counts']['total']} records · "
            f"accuracy {number(metrics['outcomes']['accuracy'])} · "
            f"ECE {number(metrics['calibration']['ece'])}"
        )
    return lines


def _percentile_lines(method: dict[str, Any] | None) -> list[str]:
    """Said only when a sketch gave some percentiles (otherwise they are exact)."""
    if not method or not method.get("sketched"):
        return []
    return [
        f"  Percentiles   {len(method['sketched'])} from a sketch (beyond "
        f"{method['exact_up_to']:,} values per group): within "
        f"{100 * method['relative_error']:g} % of the exact value"
    ]


def render_check(report: dict[str, Any]) -> str:
    """The whole text view, ending with the verdict line and a newline."""
    head = Report.view(report)
    contract, dataset = head.contract or ContractRef(), head.dataset or DatasetRef()
    lines = [
        head.first_line(),
        f"decflow {__version__} · {contract.name} ({contract.type}) · "
        f"{str(head.status).upper()}",
        "",
        f"  dataset   {dataset.path}  {short_hash(dataset.hash)}",
        "",
        *_metric_lines(report["metrics"]),
        *(f"                {line}" for line in calibration_lines(report)),
        *_percentile_lines(report.get("percentiles")),
        *_baseline_lines(report),
        *_segment_lines(report),
        *checks(head, GATE_WIDTH),
        "",
        VERDICTS[report["status"]],
    ]
    # Segment values and paths come from the records: shown escaped, one line each.
    return "\n".join(escape(line) for line in lines) + "\n"
