"""The terminal view of a contract run (test / fuzz / all), in DecGuard's shape.

Numbers go through `decflow.gates.headline.number` (at most 4 significant digits, as in
the check messages), `n/a` when missing; hashes are shortened to 12 hex digits;
warning-level checks are tagged `(warning)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from decflow.gates.headline import ORDER, failing_first, number
from decflow.report.model import BackendRef, ContractRef, DatasetRef, Report
from decflow.report.modes import mode_named
from decflow.report.run_report import RunView
from decflow.report.sections import status_label
from decflow.untrusted import escape
from decflow.version import __version__
from decflow.views.calibration_text import calibration_lines
from decflow.views.evidence_text import gate_evidence_lines

if TYPE_CHECKING:
    from decflow.report.check_report import Segment

# A WARN may rest on a requirement that is not established (evidence gating): no
# requirement fails, which is not to say they all hold.
WARN_VERDICT = "WARN: no requirement fails; some gates do not hold or are not established"
VERDICTS = {
    "pass": "PASS: all gates hold",
    "warn": WARN_VERDICT,
    "fail": "FAIL: at least one requirement does not hold",
}
# A monitor's verdict in its own words: its ALARM may be the harmful-shift alarm while every
# window's gates hold, so "a requirement does not hold" would send the reader astray.
MONITOR_VERDICTS = {
    "pass": "OK: every window's gates hold and no harmful shift is shown",
    "warn": "WARN: no window fails and no alarm; some gates are not established",
    "fail": "ALARM: a harmful shift is shown, or a window's requirement does not hold",
}
MAX_LISTED = 10
FIRST_CASES = 3  # failing cases shown per property; the rest are in the report JSON
PREVIEW = 70

Section = Callable[[RunView], list[str]]


def verdict_words(report: Report) -> tuple[str, str]:
    """The verdict at the top of a page: its word (`FAIL`, a monitor's `ALARM`) and what it
    means."""
    status = str(report.status)
    table = MONITOR_VERDICTS if report.kind == "monitor" else VERDICTS
    word, _, meaning = table.get(status, status.upper()).partition(": ")
    return word, meaning


def failing_segments_first(segments: list[Segment]) -> list[Segment]:
    """A check's segments as every view lists them: failing first, like the checks."""
    return sorted(segments, key=lambda s: ORDER.get(s.status, len(ORDER)))


def percent(value: float | None) -> str:
    """A rate as a percentage with one decimal, `12.5%`; never `-0.0%`."""
    if value is None:
        return "n/a"
    text = f"{100 * value:.1f}"
    return (text[1:] if text.startswith("-") and float(text) == 0 else text) + "%"


def answer(selected: Any, confidence: float | None) -> str:
    """A case's answer: `refund (0.96)`, or `error`."""
    return "error" if selected is None else f"{selected} ({number(confidence)})"


def counted(n: int, noun: str) -> str:
    """`1 call`, `2 calls`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def short_hash(value: str | None) -> str:
    """`sha256:` and the first 12 hex digits (a bare digest: its first 12)."""
    if not value:
        return "n/a"
    algorithm, colon, digest = value.partition(":")
    return f"{algorithm}:{digest[:12]}" if colon else value[:12]


def preview(value: Any, width: int = PREVIEW) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def header(report: Report) -> list[str]:
    contract, dataset, backend = (report.contract or ContractRef(), report.dataset or DatasetRef(),
                                  report.backend or BackendRef())
    lines = [
        report.first_line(),
        f"decflow {__version__} · {contract.name} ({contract.type}) · "
        f"{str(report.status).upper()}",
        "",
        f"  contract  {contract.path}  {short_hash(contract.hash)}",
        f"  dataset   {dataset.path}  {short_hash(dataset.hash)}",
        f"  backend   {backend.name}: {backend.provider} · {backend.model or 'n/a'}",
    ]
    health = report.health
    if health and health.status != "ok":
        lines.append(f"  health    {health.status}: {health.detail}")
    return lines


def golden_metrics(report: RunView) -> list[str]:
    metrics = report.metrics
    if metrics is None:
        return []
    counts = metrics.counts
    errored = f"{counts.errored} errored"
    if counts.errors_by_kind:
        kinds = ", ".join(f"{k} {v}" for k, v in counts.errors_by_kind.items())
        errored += f" ({kinds})"
    classification, calibration = metrics.classification, metrics.calibration
    accuracy = (
        f"  Accuracy     {number(classification.accuracy)}   "
        f"macro-F1 {number(classification.macro_f1)}"
    )
    if report.contract and report.contract.type == "score":
        accuracy += f"   ordinal MAE {number(classification.ordinal_mae)}"
    lines = [
        "",
        f"  Cases        {counts.total} total · {counts.succeeded} decided · {errored} · "
        f"{counts.labeled} labeled",
        accuracy,
        f"  Calibration  ECE {number(calibration.ece)}   Brier {number(calibration.brier)}   "
        f"NLL {number(calibration.nll)}   ({calibration.bins} bins)",
        *(f"               {line}" for line in calibration_lines(report.calibration)),
    ]
    selective = metrics.selective
    if selective:
        lines.append(
            f"  Selective    confidence >= {selective.threshold:g}: coverage "
            f"{number(selective.coverage)}   "
            f"abstention {number(selective.abstention_rate)}   "
            f"accuracy {number(selective.selective_accuracy)}"
        )
    latency = metrics.latency
    lines.append(
        f"  Latency ms   mean {number(latency.mean_ms)}   p50 {number(latency.p50_ms)}   "
        f"p95 {number(latency.p95_ms)}   max {number(latency.max_ms)}"
    )
    evidence = gate_evidence_lines(report.gate_evidence)
    lines.extend(f"  {'Evidence' if i == 0 else '':<13}{line}" for i, line in enumerate(evidence))
    return lines


def checks(report: Report, gate_width: int = 38) -> list[str]:
    """The Checks block of the run, check and diff views (gate names padded to `gate_width`),
    failing checks first."""
    if not report.checks:
        return []
    lines = ["", "  Checks"]
    for check in failing_first(report.checks):
        tag = " (warning)" if check.level == "warning" else ""
        status = status_label(check.status)
        lines.append(f"    {status:<4}  {check.gate:<{gate_width}} {check.message}{tag}")
    return lines


def failures(report: RunView) -> list[str]:
    items = report.failures
    if not items:
        return []
    lines = ["", f"  Failures ({min(len(items), MAX_LISTED)} of {len(items)})"]
    for item in items[:MAX_LISTED]:
        if item["kind"] == "error":
            detail = item["error"]
        else:
            detail = (
                f"expected {item['expected']}, selected {item['selected']} "
                f"({number(item['confidence'])})"
            )
        cached = " [answer from the call cache]" if item.get("cache_entry") else ""
        lines.append(f"    {item['case_id']}: {detail}{cached}")
        lines.append(f"      input: {preview(item['input'])}")
    return lines


def render(report: RunView, extra_sections: list[Section] | None = None) -> str:
    """The whole text view; `extra_sections` render between the checks and the verdict."""
    golden = mode_named(report.mode).fills("golden")
    sections: list[Section] = [golden_metrics] if golden else []
    sections.extend(extra_sections or [])
    lines = header(report)
    for section in sections:
        lines.extend(section(report))
    lines.extend(checks(report))
    if golden:
        lines.extend(failures(report))
    lines.extend(["", VERDICTS[str(report.status)]])
    # A blind suite or an axis that changed nothing qualifies the verdict itself.
    lines.extend(f"  {caveat}" for caveat in report.caveats())
    # Lines quote case inputs, answers and labels: shown escaped, one line each.
    return "\n".join(escape(line) for line in lines) + "\n"
