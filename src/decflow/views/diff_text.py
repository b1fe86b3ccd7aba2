"""The terminal view of a regression diff, in DecGuard's `diff` shape.

Metric rows whose two sides are both missing are hidden; segments too small to gate say
so; at most 10 changed cases are listed with a 70-character input preview.
"""

from __future__ import annotations

from decflow.gates.headline import number
from decflow.report.diff_report import DiffEvidence, DiffSide, DiffView
from decflow.report.model import BackendRef, ContractRef
from decflow.untrusted import escape
from decflow.version import __version__
from decflow.views.calibration_text import diff_calibration_lines
from decflow.views.diff_evidence import evidence_rows, gating_line, noise_line
from decflow.views.identity import cache_side
from decflow.views.text import WARN_VERDICT, answer, checks, percent, preview

VERDICTS = {
    "pass": "PASS: no regression gate is violated",
    "warn": WARN_VERDICT,
    "fail": "FAIL: the candidate regresses beyond the contract's limits",
}
MAX_CHANGES = 10


def _side(name: str, side: DiffSide) -> str:
    backend = side.backend or BackendRef()
    who = f"{backend.name or 'n/a'}: {backend.provider or 'n/a'} · {backend.model or 'n/a'}"
    cached = f" · {cache_side(side.call_cache)}" if side.call_cache else ""
    return f"  {name:<9} {side.path}  {who}{cached}"


def _signed(value: float | None) -> str:
    return "n/a" if value is None else ("+" if value > 0 else "") + number(value)


def _summary(report: DiffView) -> list[str]:
    counts, shift = report.counts, report.shift
    return [
        f"  Cases        {counts.matched} matched · {counts.compared} compared · "
        f"{counts.only_in_baseline} only in baseline · "
        f"{counts.only_in_candidate} only in candidate",
        f"  Answers      {counts.answer_flips} flipped ({percent(shift.answer_flip_rate)})"
        f" · {counts.newly_wrong} newly wrong · {counts.newly_correct} newly correct",
        f"  Errors       {counts.newly_errored} new · {counts.recovered} recovered · "
        f"{counts.still_errored} still",
        f"  Shift        mean TV {number(shift.mean_tv_distance)}   "
        f"max TV {number(shift.max_tv_distance)}   "
        f"mean JS {number(shift.mean_js_divergence)}",
        f"  Confidence   mean shift {number(shift.mean_confidence_delta)}   "
        f"mean |shift| {number(shift.mean_abs_confidence_delta)}   "
        f"max |shift| {number(shift.max_abs_confidence_delta)}",
    ]


def _metrics(report: DiffView) -> list[str]:
    lines = ["", f"  {'Metric':<16}{'baseline':>10}{'candidate':>11}{'delta':>10}"]
    for name, entry in report.metrics.items():
        if entry.baseline is None and entry.candidate is None:
            continue
        lines.append(
            f"  {name:<16}{number(entry.baseline):>10}{number(entry.candidate):>11}"
            f"{_signed(entry.delta):>10}"
        )
    lines.extend(f"  {line}" for line in diff_calibration_lines(report.calibration))
    return lines


def _segments(report: DiffView) -> list[str]:
    if not report.segments:
        return []
    lines = ["", "  Segments"]
    for s in report.segments:
        small = "" if s.gated else "   (not gated: small)"
        lines.append(
            f"    {s.key + '=' + s.value:<21} n={s.matched:<4} accuracy "
            f"{number(s.baseline_accuracy)} -> {number(s.candidate_accuracy)}   "
            f"flips {percent(s.answer_flip_rate)}{small}"
        )
    return lines


def _changes(report: DiffView) -> list[str]:
    changes = report.changes
    if not changes:
        return []
    lines = ["", f"  Changes ({min(len(changes), MAX_CHANGES)} of {len(changes)})"]
    for change in changes[:MAX_CHANGES]:
        line = (
            f"    {change['case_id']:<12} "
            f"{answer(change['baseline_selected'], change['baseline_confidence'])} -> "
            f"{answer(change['candidate_selected'], change['candidate_confidence'])}"
        )
        if change["expected"] is not None:
            line += f", expected {change['expected']}"
        if change["error"]:
            line += f" ({change['kind'].replace('_', ' ')}: {change['error']})"
        lines.append(line)
        lines.append(f"                 input: {preview(change['input'])}")
    return lines


def _evidence(evidence: DiffEvidence | None) -> list[str]:
    """How the diff was gated, the rerun noise, and each gate's decision."""
    gating = gating_line(evidence)
    if gating is None:
        return []
    lines = ["", f"  Evidence     {gating}", f"  Noise        {noise_line(evidence)}"]
    for gate, level, phrase, method, cases, _mcnemar in evidence_rows(evidence):
        warning = " (warning)" if level == "warning" else ""
        lines.append(f"    {gate + warning:<30} {phrase}")
        lines.append(f"    {'':<30} {method}{f', n={cases}' if cases else ''}")
    return lines


def render_diff(report: DiffView) -> str:
    """The whole text view, ending with the verdict line and a newline."""
    contract = report.contract or ContractRef()
    lines = [
        report.first_line(),
        f"decflow {__version__} · diff {contract.name} ({contract.type}) · "
        f"{str(report.status).upper()}",
        "",
        _side("baseline", report.baseline or DiffSide()),
        _side("candidate", report.candidate or DiffSide()),
    ]
    if report.gates_from:
        lines.append(f"  gates     {report.gates_from}")
    if report.same_dataset is False:
        lines.append("  note      the runs used different datasets; cases are matched by id")
    # checks and changed cases first: what an on-call reader acts on
    lines += [
        *checks(report, gate_width=30),
        *_changes(report),
        *_evidence(report.evidence),
        "",
        *_summary(report),
        *_metrics(report),
        *_segments(report),
        "",
        VERDICTS[str(report.status)],
    ]
    # Lines quote case inputs, answers and segment values: shown escaped, one line each.
    return "\n".join(escape(line) for line in lines) + "\n"
