"""The Markdown view of a report (the `--markdown` file and the Prefect report artifact).

It is the summary a reader needs to act on: status, identity, metrics, failing checks, the
property table and diagnostics (run reports); counts, shift, metrics and segments (diff);
metrics, drift and segments (check). What a summary shows is decided by
`decflow.report.sections`. User text is escaped for Markdown and inline HTML, and control
and bidi characters are shown as escapes like the terminal view (`decflow.untrusted`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from decflow.gates.headline import bounds, failing_first, number
from decflow.report.kinds import is_check, is_diff, is_monitor, is_run, view_model
from decflow.report.model import CheckRow, ContractRef, Diagnostics, Report
from decflow.report.run_report import GoldenMetrics, Properties, RunView, Sequential
from decflow.report.sections import (
    axis_base,
    axis_rate,
    axis_verdict,
    failures_by_property,
    labels_of,
    shown_golden,
    shown_pairs,
    status_label,
)
from decflow.untrusted import escape
from decflow.views.cache_text import cache_lines
from decflow.views.calibration_text import calibration_lines
from decflow.views.evidence_text import gate_evidence_lines
from decflow.views.identity import gates_text, identity_rows, side_rows
from decflow.views.sequential_text import from_cache
from decflow.views.text import (
    FIRST_CASES,
    MAX_LISTED,
    answer,
    counted,
    failing_segments_first,
    preview,
    verdict_words,
)
from decflow.views.words import words

if TYPE_CHECKING:
    from decflow.report.check_report import CheckView
    from decflow.report.diff_report import DiffEvidence, DiffView
    from decflow.report.monitor_report import MonitorReport

MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def level_tag(level: str) -> str:
    """A check's level as readers see it next to the gate (matches the text view)."""
    return " (warning)" if level == "warning" else ""


# -- Markdown rendering -----------------------------------------------------------------


def md(value: Any) -> str:
    """Escape user text for one line of Markdown (tables included)."""
    text = value if isinstance(value, str) else preview(value, 10_000)
    text = escape(" ".join(text.split()))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return MD_SPECIAL.sub(r"\\\1", text)


def cell(value: Any, escape: Callable[[Any], str] = md) -> str:
    """A value as table cell text: numbers through `number`, anything else `escape`d."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number(value)
    return escape(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return [*lines, ""]


def kv_table(mapping: dict[str, Any], headers: tuple[str, str]) -> list[str]:
    """Keys as words (`views.words`); structures left out."""
    return table(headers, [(md(words(k)), cell(v)) for k, v in mapping.items()
                           if not isinstance(v, dict | list)])


def status_line(report: Report, title: str) -> list[str]:
    """The headline, then the title, the verdict in words and the caveats."""
    return [f"**{md(report.first_line())}**", "", *verdict_lines(report, title)]


def verdict_lines(report: Report, title: str) -> list[str]:
    """The title, the verdict in words and the caveats (the Prefect artifact, whose
    description is the headline, starts here)."""
    word, verdict = verdict_words(report)
    caveats = [f"**{md(c)}**" for c in report.caveats()]
    exit_code = "n/a" if report.exit_code is None else report.exit_code
    return [f"# {title}", "", f"**{word}**: {verdict} · exit code {exit_code}", "",
            *(f"{c}  " for c in caveats), ""]


def identity(report: Report) -> list[str]:
    """What the report is about, one item per line (long text wraps, unlike a table row)."""
    rows = [f"- **{name}**: {md(text)}" for name, text in identity_rows(report)]
    return ["## Identity", "", *rows, ""] if rows else []


# Comparisons as words: a cell starting with `>` renders as a quote bar in Markdown tables
# (the Prefect UI renders table-artifact cells as Markdown too).
COMPARISONS = {">=": "at least", "<=": "at most", "<": "below"}  # gates.checks.Comparison
CHECK_HEADERS = ("status", "gate", "metric", "comparison", "threshold", "value", "message")


def check_value(value: float | None) -> str:
    """A check's value as its message shows it."""
    return number(value)


def check_cells(check: CheckRow) -> dict[str, str]:
    """One check as Markdown-safe cell text, keyed by `CHECK_HEADERS`."""
    return {
        "status": status_label(check.status),
        "gate": md(check.gate) + level_tag(check.level),
        "metric": md(check.metric or "n/a"),
        "comparison": COMPARISONS.get(check.comparison, md(check.comparison)),
        "threshold": f"{check.threshold:g}",
        "value": check_value(check.value),
        "message": md(check.message),
    }


def checks_block(report: Report) -> list[str]:
    checks = report.checks
    if not checks:
        return ["## Checks", "", "No gate is configured for this run.", ""]
    failing = report.failing_checks()
    lines = [f"## Checks: {len(checks) - len(failing)} of {len(checks)} hold", ""]
    rows = (check_cells(c) for c in failing_first(checks))
    lines.extend(table(CHECK_HEADERS, ([row[h] for h in CHECK_HEADERS] for row in rows)))
    return lines


def golden_block(report: RunView, metrics: GoldenMetrics) -> list[str]:
    counts, classification = metrics.counts, metrics.classification
    calibration, latency, selective = metrics.calibration, metrics.latency, metrics.selective
    rows = [
        ("cases", f"{counts.total} total · {counts.succeeded} decided · "
                  f"{counts.errored} errored · {counts.labeled} labeled"),
        ("accuracy", cell(classification.accuracy)),
        ("macro-F1", cell(classification.macro_f1)),
        ("ECE / Brier / NLL",
         " / ".join(cell(v) for v in (calibration.ece, calibration.brier, calibration.nll))),
        ("coverage / selective accuracy",
         f"{cell(selective and selective.coverage)} / "
         f"{cell(selective and selective.selective_accuracy)}"),
        ("latency p50 / p95 ms", f"{cell(latency.p50_ms)} / {cell(latency.p95_ms)}"),
    ]
    if report.contract and report.contract.type == "score":
        rows.insert(3, ("ordinal MAE", cell(classification.ordinal_mae)))
    # sentences as list items: they wrap, where a table row runs off a narrow page
    notes = [*(f"- calibration: {md(line)}" for line in calibration_lines(report.calibration)),
             *(f"- evidence: {md(line)}" for line in gate_evidence_lines(report.gate_evidence))]
    return ["## Metrics", "", *table(("metric", "value"), rows),
            *([*notes, ""] if notes else [])]


def properties_block(typed: Properties) -> list[str]:
    lines = ["## Properties", ""]
    lines.extend(table(
        ("property", "level", "evaluated", "violations", "flips", "max TV", "errors", "skipped"),
        ((md(s.property) + (" (identity: rerun evidence)" if s.rerun_evidence else ""),
          md(s.level), str(s.n_evaluated),
          f"{s.n_violations} ({cell(s.violation_rate)})",
          f"{s.n_flips} ({cell(s.flip_rate)})", cell(s.max_tv_distance),
          str(s.n_errors), str(s.n_skipped))
         for s in typed.summaries),
    ))
    for evidence in typed.rate_evidence:
        lines.append(f"- {md(evidence.gate)}: {md(evidence.statement)}")
    if typed.rate_evidence:
        lines.append("")
    skipped = typed.skipped
    if skipped:
        names = ", ".join(f"{s['property']}/{s['case_id']}" for s in skipped[:MAX_LISTED])
        more = ", …" if len(skipped) > MAX_LISTED else ""
        lines.append(f"Skipped cases: {len(skipped)} ({md(names)}{more})")
        lines.append("")
    return lines


def property_failures_block(properties: Properties, labels: Sequence[str]) -> list[str]:
    """The failing transformed cases, the first few of each property."""
    lines: list[str] = []
    groups = failures_by_property(properties)
    if groups:
        listed = sum(len(items) for _, items in groups)
        total = listed if properties.n_failures is None else properties.n_failures
        lines.extend([f"Failing transformed cases ({total}), by property:", ""])
    for name, items in groups:
        shown = items[:FIRST_CASES]
        lines.extend([f"**{md(name)}**: {counted(len(items), 'failing case')}"
                      f"{'' if len(items) == len(shown) else f', the first {len(shown)}'}", ""])
        for item in shown:
            lines.append(f"- {md(item.get('id', item.get('case_id')))}: "
                         f"{md('; '.join(problems(item)))}")
            lines.append(f"  - sent: {sent(item, labels)}")
            if item.get("reduced"):
                lines.append(f"  - minimal: {sent(item['reduced'], labels)}")
        if len(items) > len(shown):
            lines.append(f"- … {len(items) - len(shown)} more in the report JSON "
                         "(`properties.failures`)")
        lines.append("")
    return lines


def sent(item: dict[str, Any], labels: Sequence[str]) -> str:
    """Labels as shown, in order, then the input preview."""
    shown = ", ".join(s for s, _ in shown_pairs(item, labels))
    return f"[{md(shown)}] {md(preview(item.get('input')))}"


def problems(item: dict[str, Any]) -> list[str]:
    """Why a transformed case failed: its violations, or its error."""
    found = [str(v) for v in item.get("violations") or []]
    error = item.get("error")
    if error:
        found.append(f"{error['kind']}: {error['message']}" if isinstance(error, dict)
                     else str(error))
    return found or ["failed"]


def interval(item: dict[str, Any]) -> str:
    return bounds(item.get("ci_low"), item.get("ci_high"))


def diagnostics_block(diagnostics: Diagnostics) -> list[str]:
    lines = ["## Diagnostics", ""]
    stability = diagnostics.stability
    if stability:
        reasks = (stability.sources or {}).get("identity_paraphrase")
        evidence = f" (incl. {reasks} identity paraphrase re-asks)" if reasks else ""
        lines.append(f"- Stability: **{md(stability.verdict)}**: {stability.flips} of "
                     f"{stability.pairs} rerun pairs flipped{evidence}, 95% per side "
                     f"{bounds(stability.ci_low, stability.ci_high)} vs ε "
                     f"{stability.epsilon:g}")
    blindness = diagnostics.blindness
    if blindness:
        state = "**BLIND**" if blindness.blind else "not blind"
        lines.append(f"- Blindness: {state}: skew {number(blindness.skew)} on label "
                     f"{md(blindness.modal_label or 'n/a')} (threshold "
                     f"{number(blindness.threshold)})")
    if diagnostics.guidance:
        lines.append(f"- Oracle: {md(diagnostics.guidance)}")
    for item in diagnostics.not_exercised or []:
        lines.append(f"- Not exercised: {md(item.name)} (n/a: {md(item.reason)})")
    counterfactual = diagnostics.counterfactual
    axes = [a.to_dict() for a in counterfactual.axes] if counterfactual else []
    lines.append("")
    if axes:
        lines.extend(table(
            ("axis", "pairs", "flips", "excess (or rate)", "bounds", "p (Holm)", "verdict"),
            ((md(a["axis"]), cell(axis_base(a)), cell(a.get("flips")), cell(axis_rate(a)),
              interval(a), cell(a.get("p_holm")), md(axis_verdict(a))) for a in axes),
        ))
        # sentences below the table: they wrap, a table row does not in every viewer
        lines.extend(f"- {md(a['axis'])}: {md(a['evidence'])}" for a in axes
                     if a.get("evidence"))
        lines.append("")
    return lines


def failures_block(report: RunView) -> list[str]:
    items = report.failures
    if not items:
        return []
    lines = [f"## Golden failures ({min(len(items), MAX_LISTED)} of {len(items)})", ""]
    for item in items[:MAX_LISTED]:
        detail = (md(item["error"]) if item["kind"] == "error" else
                  f"expected {md(item['expected'])}, selected {md(item['selected'])} "
                  f"({number(item['confidence'])})")
        cached = " (answer from the call cache)" if item.get("cache_entry") else ""
        lines.append(f"- {md(item['case_id'])}: {detail}{cached}: "
                     f"{md(preview(item['input']))}")
    return [*lines, ""]


def sequential_block(section: Sequential) -> list[str]:
    """A sequential run: the calls it made against the full suite's, and why it stopped."""
    made, full = section.calls_made, section.calls_full
    saved = [f"{cell(section.seconds_saved)} s"] if section.seconds_saved else []
    if section.money_saved is not None:
        saved.append(f"{cell(section.money_saved)} at {cell(section.price_per_call)} "
                     "per call")
    ratio = f" ({cell(full / made)}× fewer)" if 0 < made < full else ""
    return ["", f"**Sequential:** {made} of {full} backend calls{ratio}"
                f"{from_cache(section)}, "
                f"{section.cases_sent} of "
                f"{section.suite_cases} cases; stopped: {md(section.stop_reason)}"
                + (f"; saved about {' and '.join(saved)}" if saved else "")]


Sections = list[tuple[str, list[str]]]


def run_title(head: Report) -> str:
    contract = head.contract or ContractRef()
    kind = f" ({md(contract.type)})" if contract.type else ""
    return f"decflow {head.mode or 'run'}: {md(contract.name or 'n/a')}{kind}"


def run_sections(report: RunView) -> Sections:
    """A run report's sections after its status lines, named (see `render_markdown`)."""
    sections: Sections = [("identity", identity(report))]
    if report.sequential is not None:
        sections.append(("sequential", sequential_block(report.sequential)))
    if report.call_cache is not None:
        first, *rest = cache_lines(report.call_cache)
        sections.append(("call cache", ["", f"**{md(first[0].upper() + first[1:])}**",
                                        *(f"- {md(line)}" for line in rest), ""]))
    golden = shown_golden(report)
    if golden is not None:
        sections.append(("metrics", golden_block(report, golden)))
    sections.append(("checks", checks_block(report)))
    # Diagnostics first: they say how far the property results can be trusted.
    if report.diagnostics is not None and report.diagnostics.given():
        sections.append(("diagnostics", diagnostics_block(report.diagnostics)))
    if report.properties is not None:
        sections.append(("properties", properties_block(report.properties)))
        sections.append(("failing cases", property_failures_block(report.properties,
                                                                  labels_of(report))))
    if golden is not None:
        sections.append(("failing cases", failures_block(report)))
    return sections


def segments_table(segments: Iterable[tuple[str, Sequence[Any]]],
                   headers: Sequence[str]) -> list[str]:
    """One row per segment: `key=value`, then its values under `headers`."""
    return table(("segment", *headers), (
        (md(name), *(cell(value) for value in values)) for name, values in segments))


def diff_identity(report: DiffView) -> list[str]:
    """The two runs compared (run, contract hash, dataset, backend; once when both sides
    agree) and whose gates apply."""
    lines = [f"- **{name}**: both {md(base)}" if base == cand else
             f"- **{name}**: baseline {md(base)}; candidate {md(cand)}"
             for name, base, cand in side_rows(report)]
    return ["## Identity", "", *lines, "", f"Gates: {md(gates_text(report))}", ""]


def changes_block(report: DiffView) -> list[str]:
    """The diff's changed cases, the first `MAX_LISTED` (all of them are in the JSON)."""
    changes = report.changes
    if not changes:
        return []
    shown = changes[:MAX_LISTED]
    return [f"## Changed cases ({len(shown)} of {len(changes)})", "", *table(
        ("case", "change", "baseline", "candidate", "expected", "input"),
        ((md(c.get("case_id")), md(str(c.get("kind", "")).replace("_", " ")),
          md(answer(c.get("baseline_selected"), c.get("baseline_confidence"))),
          md(answer(c.get("candidate_selected"), c.get("candidate_confidence"))),
          cell(c.get("expected")), md(preview(c.get("input")))) for c in shown))]


def diff_sections(report: DiffView) -> Sections:
    """Checks and changed cases first (what an on-call reader acts on), then the counts,
    shift, metrics and segments behind them."""
    sections: Sections = [
        ("identity", diff_identity(report)), ("checks", checks_block(report)),
        ("failing cases", changes_block(report)), ("evidence", evidence_block(report.evidence)),
        ("counts", ["## Counts", "", *kv_table(report.counts.to_dict(), ("count", "value"))]),
        ("shift", ["## Shift", "", *kv_table(report.shift.to_dict(), ("measure", "value"))]),
        ("metrics", ["## Metrics", "", *table(("metric", "baseline", "candidate", "delta"), (
            (md(words(name)), cell(m.baseline), cell(m.candidate), cell(m.delta))
            for name, m in report.metrics.items()))])]
    segments = report.segments
    if segments:
        sections.append(("segments", ["## Segments", "", *segments_table(
            ((f"{s.key}={s.value}", (s.matched, s.baseline_accuracy, s.candidate_accuracy,
                                     s.accuracy_drop, s.answer_flip_rate)) for s in segments),
            ("cases", "accuracy before", "after", "drop", "flips"))]))
    return sections


def evidence_block(evidence: DiffEvidence | None) -> list[str]:
    """The diff's gating, rerun noise and per-gate decisions (interval, noise floor)."""
    from decflow.views.diff_evidence import evidence_items, gating_line, noise_line

    gating = gating_line(evidence)
    if gating is None:
        return []
    return ["## Evidence", "", md(gating), "",
            f"Rerun noise: {md(noise_line(evidence) or '')}", "",
            *(f"- {md(item)}" for item in evidence_items(evidence)), ""]


def check_sections(typed: CheckView) -> Sections:
    """Checks first (what an on-call reader acts on), then the metrics, drift and segments
    behind them."""
    sections: Sections = [("identity", identity(typed)), ("checks", checks_block(typed))]
    metrics = typed.metrics
    outcomes, calibration, routing = metrics.outcomes, metrics.calibration, metrics.routing
    rows = {"records": metrics.counts.total, "accuracy": outcomes.accuracy,
            "error_rate": outcomes.error_rate, "ece": calibration.ece,
            "brier": calibration.brier, "nll": calibration.nll,
            "mean confidence": metrics.confidence.mean,
            "threshold coverage": None if metrics.threshold is None
            else metrics.threshold.coverage,
            "abstention_rate": routing.abstention_rate,
            "human_review_rate": routing.human_review_rate,
            "fallback_rate": routing.fallback_rate}
    sections.append(("metrics", ["## Metrics", "", *kv_table(rows, ("metric", "value"))]))
    drift = typed.drift.to_dict()
    if any(v is not None for v in drift.values()):
        sections.append(("drift", ["## Drift against the baseline", "",
                                   *kv_table(drift, ("measure", "value"))]))
    if typed.segments:
        sections.append(("segments", ["## Segments", "", *segments_table(
            ((f"{s.key}={s.value}", (s.status, s.metrics.counts.total,
                                     s.metrics.outcomes.accuracy, s.metrics.calibration.ece))
             for s in failing_segments_first(typed.segments)),
            ("status", "records", "accuracy", "ECE"))]))
    return sections


def titled_sections(report: Report) -> tuple[str, Sections]:
    """The report's title and its sections after the status lines, by report kind."""
    if is_diff(report):
        return "decflow diff", diff_sections(report)
    if is_check(report):
        return "decflow check", check_sections(report)
    if is_monitor(report):
        return f"decflow monitor: {md(report.contract.name)}", monitor_sections(report)
    if is_run(report):
        return run_title(report), run_sections(report)
    return run_title(report), [("identity", identity(report)), ("checks", checks_block(report))]


SHOWN_WINDOWS = 14  # a monitor's newest windows in its Markdown view


def monitor_sections(typed: MonitorReport) -> Sections:
    """A monitor run (the Prefect artifact): what this run read, the newest windows with
    their verdicts and open gates, then the checks its verdict follows from."""
    from decflow.views.monitor_text import WORDS, open_gates, read_line, shift_line

    monitor = typed.monitor
    sections: Sections = [("identity", kv_table({
        "monitor": monitor.id, "source": monitor.source, "labels": monitor.labels or "none",
        "window": monitor.window, "baseline": (monitor.baseline or {}).get("path") or "none",
        "this run": read_line(typed.this_run), "harmful shift": shift_line(typed)},
        ("", "")))]
    shown = list(reversed(typed.windows))[:SHOWN_WINDOWS]
    if shown:
        checked = set(typed.checked)
        rows = [(md(w.name) + (" (this run)" if w.name in checked else ""), WORDS[w.status],
                 str(w.n_records), str(w.n_labelled), md(w.reason), md(open_gates(w)))
                for w in shown]
        sections.append(("windows", [
            f"## Windows ({len(shown)} newest of {len(typed.windows)})", "",
            *table(("window", "verdict", "records", "labelled", "last judged for",
                    "open gates"), rows)]))
    sections.append(("checks", checks_block(typed)))
    return sections


def render_markdown(shown: Report | dict[str, Any]) -> str:
    """The Markdown summary of a run, diff or check report: the headline, title, verdict
    and caveats, then the sections of its kind (a report dict is read as its kind's model
    first)."""
    report = view_model(shown)
    title, sections = titled_sections(report)
    lines = status_line(report, title)
    for _, section in sections:
        lines.extend(section)
    # One pass over the page, as the text view does per line (code blocks quote inputs raw).
    return escape("\n".join(lines).rstrip(), keep_newlines=True) + "\n"
