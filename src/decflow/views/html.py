"""The HTML view of a report: one self-contained file (inline CSS and SVG, no script, no
external font, stylesheet, image or link), every piece of report text escaped; control and
bidi characters are shown as escapes like the terminal view (`decflow.untrusted`), since a
browser's rendering of U+202E or U+2066 reorders what a reader sees.

Run reports show the status banner, identity, gate table, golden metrics with the
reliability diagram and confidence histogram, the per-property violation/flip chart with
failing examples (as sent, and minimal) and skipped cases, and diagnostics. Diff reports
show counts, shift, metric deltas and segments; check reports metrics, drift and segments.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from decflow.gates.headline import bounds, failing_first, number
from decflow.report.kinds import is_check, is_diff, is_monitor, is_run, view_model
from decflow.report.model import Diagnostics, Open, Report
from decflow.report.run_report import GoldenMetrics, Properties, RunView, Sequential
from decflow.report.sections import (
    axis_base,
    axis_rate,
    axis_verdict,
    bin_edges,
    confidence_histogram,
    failures_by_property,
    labels_of,
    shown_golden,
    shown_pairs,
    status_label,
)
from decflow.untrusted import escape
from decflow.version import __version__
from decflow.views.cache_text import cache_lines
from decflow.views.calibration_text import calibration_lines
from decflow.views.evidence_text import gate_evidence_lines
from decflow.views.identity import flat_text, gates_text, identity_rows, side_rows
from decflow.views.markdown import cell, level_tag, problems
from decflow.views.sequential_text import gate_interval, time_uniform
from decflow.views.svg import Bar, BarRow, hbar_chart, histogram, nice_max, reliability_diagram
from decflow.views.text import (
    FIRST_CASES,
    answer,
    counted,
    failing_segments_first,
    short_hash,
    verdict_words,
)
from decflow.views.words import words

if TYPE_CHECKING:
    from decflow.report.check_report import CheckView, Segment
    from decflow.report.diff_report import DiffEvidence, DiffView
    from decflow.report.monitor_report import MonitorReport

# Cells right-aligned as numbers: "0.818", "-0.039", "27 (0.818)".
NUMERIC = re.compile(r"-?\d[\d.]*(?: \(-?[\d.]+\))?\Z")
MAX_ROWS = 200
MAX_INPUT = 2000
RERUN_NOTE = '<br><span class="muted">identity: rerun evidence, not a paraphrase test</span>'

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0;
 background:#f4f5f7}
main{max-width:1240px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;
 border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:14px;margin:16px 0 6px}
.banner{border-radius:8px;padding:14px 18px;color:#fff;display:flex;gap:18px;
 align-items:center}
.banner .st{font-size:28px;font-weight:700;letter-spacing:1px}
.banner.pass{background:#2e7d4f}.banner.warn{background:#b7791f}.banner.fail{background:#b3261e}
.banner p{margin:2px 0}.sub{opacity:.9;font-size:13px}
table{border-collapse:collapse;background:#fff;margin:4px 0 10px;font-size:13px;
 max-width:100%}
th,td{border:1px solid #e0e0e0;padding:4px 8px;text-align:left;vertical-align:top;
 overflow-wrap:break-word}td code{word-break:break-all}
th{background:#eef0f3;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.fail td{background:#fdecea}tr.warn td{background:#fff6e0}
.pill{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;font-weight:700;
 color:#fff}.pill.pass{background:#2e7d4f}.pill.warn{background:#b7791f}
.pill.fail{background:#b3261e}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;background:#f7f7f9;
 padding:4px 6px;border-radius:4px}
.cards{display:flex;flex-wrap:wrap;gap:8px}.card{background:#fff;border:1px solid #e0e0e0;
 border-radius:6px;padding:6px 12px;min-width:110px}.card b{display:block;font-size:18px}
.card span{font-size:11px;color:#666}
.plots{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.plot{background:#fff;border:1px solid #e0e0e0;border-radius:6px;max-width:100%;height:auto}
.example{background:#fff;border:1px solid #e0e0e0;border-left:4px solid #b3261e;
 border-radius:6px;padding:8px 12px;margin:8px 0}
.group{margin:10px 0 18px}h4{font-size:14px;margin:12px 0 4px}
h5{font-size:13px;margin:6px 0 2px}.example p{margin:2px 0}.problem{color:#b3261e}
.parts{display:grid;grid-template-columns:1fr 1fr;gap:16px}
details{margin:6px 0}summary{cursor:pointer;color:#444;font-weight:600}
.labels{display:inline-block}.labels span{display:inline-block;border:1px solid #bbb;
 border-radius:4px;padding:0 6px;margin:0 4px 2px 0;background:#fafafa}.muted{color:#666}
footer{margin-top:30px;color:#888;font-size:12px}
"""


def e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _escape_cell(value: Any) -> str:
    return e(json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value)


def val(value: Any) -> str:
    """A value as escaped cell text: numbers through `number`, JSON for structures."""
    return cell(value, _escape_cell)


def clip(value: Any, limit: int = MAX_INPUT) -> str:
    """A user input as escaped, pre-formatted text (JSON objects pretty-printed)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(text) - limit} more characters)"
    return f"<pre>{e(text)}</pre>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]],
          row_classes: Iterable[str] | None = None) -> str:
    """Headers are plain text; cells are HTML already escaped by the caller."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    classes = iter(row_classes) if row_classes is not None else None
    body = []
    for row in rows:
        cls = next(classes, "") if classes is not None else ""
        cells = "".join(
            f'<td class="n">{c}</td>' if NUMERIC.match(c) else f"<td>{c}</td>"
            for c in row
        )
        body.append(f'<tr class="{e(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f"<table>{thead}<tbody>{''.join(body)}</tbody></table>"


def kv_table(mapping: dict[str, Any], headers: tuple[str, str] = ("measure", "value")) -> str:
    """Keys as words (`views.words`), values through `val`."""
    return table(headers, ((e(words(k)), val(v)) for k, v in mapping.items()))


def interval(low: float | None, high: float | None) -> str:
    """An interval as the report's numbers: `[0.01, 0.2]`, one-sided `≤ 0.2` / `≥ 0.01`,
    nothing when neither end was computed (never `[n/a, n/a]`)."""
    if low is None and high is None:
        return ""
    if low is None:
        return f"≤ {number(high)}"
    if high is None:
        return f"≥ {number(low)}"
    return bounds(low, high)


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def e_cell(value: float | None) -> str:
    """An e-value as a number from 0.001 to a million (`number`), beyond as a power of ten
    (`3.2×10¹⁵`, `7.7×10⁻⁶`): its size only says how far past the decision it is."""
    if value is None or value == 0 or 1e-3 <= abs(value) < 1e6:
        return number(value)
    mantissa, exponent = f"{float(value):.1e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(SUPERSCRIPT)}"


def records_table(items: Sequence[dict[str, Any]]) -> str:
    """Any list of flat records, columns in first-seen key order."""
    columns: dict[str, None] = {}
    for item in items:
        columns.update(dict.fromkeys(item))
    shown = items[:MAX_ROWS]
    more = f'<p class="muted">{len(items) - len(shown)} more not shown.</p>' if len(
        items) > len(shown) else ""
    return table(list(columns), ([val(i.get(c)) for c in columns] for i in shown)) + more


def section(title: str, *parts: str) -> str:
    return f"<section><h2>{e(title)}</h2>{''.join(parts)}</section>"


def pill(status: str) -> str:
    shown = "warn" if status == "not_established" else status
    return f'<span class="pill {e(shown)}">{e(status_label(status))}</span>'


def cards(items: Iterable[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{v}</b><span>{e(k)}</span></div>' for k, v in items) + "</div>"


def plots(*svgs: str) -> str:
    return '<div class="plots">' + "".join(s for s in svgs if s) + "</div>"


# -- shared sections --------------------------------------------------------------------


def banner(report: Report, title: str) -> str:
    """The verdict at the top of a page (a monitor's in its words: OK / WARN / ALARM)."""
    status = str(report.status)
    word, verdict = verdict_words(report)
    facts = [f"exit code {e('n/a' if report.exit_code is None else report.exit_code)}"]
    for name, value in (("mode", report.mode), ("created at", report.created_at)):
        if value:
            facts.append(f"{e(name)} {e(value)}")
    # Caveats of a blind or partly unexercised suite qualify the verdict itself.
    caveats = "".join(f"<p><b>{e(c)}</b></p>" for c in report.caveats())
    return (f'<div class="banner {e(status)}"><div class="st">{e(word)}</div>'
            f'<div><p class="headline">{e(report.first_line())}</p>'
            f"<h1>{e(title)}</h1><p>{e(verdict)}</p>{caveats}"
            f'<p class="sub">{" · ".join(facts)}</p></div></div>')


def identity(report: Report) -> str:
    """Run and check reports: one row per what the report is about; diffs: the two runs
    side by side and whose gates apply. Short text only (see `views.identity`)."""
    if is_diff(report):
        sides = table(("", "baseline", "candidate"),
                      ((e(name), e(base), e(cand)) for name, base, cand in side_rows(report)))
        return section("Identity", sides, f"<p>Gates: {e(gates_text(report))}</p>")
    rows = identity_rows(report)
    if not rows:
        return ""
    return section("Identity", table(("", ""), ((e(k), e(v)) for k, v in rows)))


def gates(report: Report) -> str:
    checks = report.checks
    if not checks:
        return section("Gates", '<p class="muted">No gate is configured for this run.</p>')
    failing = len(report.failing_checks())
    ordered = failing_first(checks)
    rows = (
        (pill(c.status), e(c.gate) + e(level_tag(c.level)), e(c.level), val(c.value),
         e(c.message))
        for c in ordered
    )
    return section(
        f"Gates: {len(checks) - failing} of {len(checks)} hold",
        table(("status", "gate", "level", "value", "message"), rows,
              ("warn" if c.status == "not_established" else c.status for c in ordered)),
    )


def calibration_plots(bins: list[dict[str, Any]], counts: list[int] | None,
                      threshold: float | None, *beside: str) -> str:
    """The reliability diagram of `bins` and the confidence histogram of `counts` (cases
    per bin), `beside` them what fits in the row (a table)."""
    hist = histogram(counts, bin_edges(bins), threshold=threshold) if counts else ""
    return plots(reliability_diagram(bins), hist, *beside)


# -- run reports ------------------------------------------------------------------------


def golden_metrics(report: RunView, metrics: GoldenMetrics) -> str:
    counts, classification = metrics.counts, metrics.classification
    calibration, latency, selective = metrics.calibration, metrics.latency, metrics.selective
    items = [
        ("cases", f"{counts.total}"), ("decided", f"{counts.succeeded}"),
        ("errored", f"{counts.errored}"), ("labeled", f"{counts.labeled}"),
        ("accuracy", val(classification.accuracy)),
        ("macro-F1", val(classification.macro_f1)),
        ("ECE", val(calibration.ece)), ("Brier", val(calibration.brier)),
        ("NLL", val(calibration.nll)), ("coverage", val(selective and selective.coverage)),
        ("selective accuracy", val(selective and selective.selective_accuracy)),
        ("latency p50 ms", val(latency.p50_ms)),
        ("latency p95 ms", val(latency.p95_ms)),
    ]
    if classification.ordinal_mae is not None:
        items.insert(6, ("ordinal MAE", val(classification.ordinal_mae)))
    per_label = classification.per_label
    label_table = table(("label", "precision", "recall", "F1", "support"), (
        (e(label), val(m["precision"]), val(m["recall"]), val(m["f1"]), val(m["support"]))
        for label, m in per_label.items())) if per_label else ""
    errors = counts.errors_by_kind
    listed = ", ".join(f"{k} {v}" for k, v in errors.items())
    error_line = f'<p class="muted">Errors by kind: {e(listed)}</p>' if errors else ""
    error_line += "".join(f'<p class="muted">{e(line)}</p>'
                          for line in calibration_lines(report.calibration)
                          + gate_evidence_lines(report.gate_evidence))
    bins = calibration.reliability
    return section("Metrics", cards(items), error_line, calibration_plots(
        bins, confidence_histogram(bins, report.results),
        selective.threshold if selective else None, label_table))


def properties_view(properties: Properties, labels: list[str]) -> str:
    summaries = properties.summaries
    rows = (
        (e(s.property) + (RERUN_NOTE if s.rerun_evidence else ""), e(s.level),
         e(s.relation), val(s.n_evaluated), f"{s.n_violations} ({val(s.violation_rate)})",
         f"{s.n_flips} ({val(s.flip_rate)})", val(s.max_tv_distance),
         val(s.n_errors), val(s.n_skipped), val(s.n_reduced))
        for s in summaries
    )
    chart = hbar_chart(
        [BarRow(s.property, (
            Bar(s.violation_rate, note=f"{s.n_violations}/{s.n_evaluated}"),
            Bar(s.flip_rate, note=f"{s.n_flips}/{s.n_evaluated}"),
        )) for s in summaries],
        ("violation rate", "flip rate"), "Property violations and flips", kind="properties",
    ) if summaries else ""
    evidence = properties.rate_evidence
    # the statement repeats count, rate and interval: the columns say it, beside the chart
    evidence_table = "<div><h3>Rate evidence (case as unit, 95% per side)</h3>" + table(
        ("gate", "variants", "cases", "rate", "95% per side", "limit"),
        ((e(i.gate), f"{i.count}/{i.n if i.variants is None else i.variants}", val(i.n),
          val(i.rate), bounds(i.ci_low, i.ci_high), val(i.limit)) for i in evidence)
    ) + "</div>" if evidence else ""
    parts = [
        table(("property", "level", "relation", "evaluated", "violations", "flips", "max TV",
               "errors", "skipped", "minimized"), rows),
        plots(chart, evidence_table),
        failing_examples(properties, labels),
    ]
    skipped = properties.skipped
    if skipped:
        parts.append(f"<h3>Skipped cases ({len(skipped)})</h3>")
        parts.append(records_table(skipped))
    return section("Properties", *parts)


def labels_shown(item: dict[str, Any], labels: Sequence[str]) -> str:
    spans = []
    for shown, label in shown_pairs(item, labels):
        mapped = "" if shown == label else f' <span class="muted">= {e(label)}</span>'
        spans.append(f"<span>{e(shown)}{mapped}</span>")
    return f"labels shown, in order: {''.join(spans)}"


def outcome(item: dict[str, Any], labels: Sequence[str]) -> str:
    """What came back: the selected labels before/after, TV distance and probabilities."""
    result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
    probabilities = item.get("probabilities") or result.get("probabilities")
    if isinstance(probabilities, list):
        probabilities = dict(zip(labels, probabilities, strict=False))
    comparison = item.get("comparison") or {}
    facts = []
    if comparison.get("selected_before") is not None:
        facts.append(f"selected <b>{e(comparison['selected_before'])}</b> originally, "
                     f"<b>{e(comparison.get('selected_after'))}</b> here")
    elif result.get("selected") is not None:
        facts.append(f"selected <b>{e(result['selected'])}</b>")
    if comparison.get("tv_distance") is not None:
        facts.append(f"TV {number(comparison['tv_distance'])}")
    if probabilities:
        facts.append(e(", ".join(f"{k} {number(v)}" for k, v in probabilities.items())))
    return " · ".join(facts)


def example_part(item: dict[str, Any], labels: Sequence[str], heading: str) -> str:
    """One side of a failing case, four lines: what was shown (labels, steps), the input,
    what came back, and why it fails."""
    steps = item.get("steps")
    shown = "; ".join(flat_text(s) if isinstance(s, dict) else str(s) for s in steps or [])
    steps_part = f' <span class="muted">· steps: {e(shown)}</span>' if steps else ""
    came_back = outcome(item, labels)
    why = "; ".join(problems(item))
    return (f'<div><h5>{e(heading)}</h5><div><div class="labels">'
            f"{labels_shown(item, labels)}</div>{steps_part}</div>{clip(item.get('input'))}"
            f"{f'<p>{came_back}</p>' if came_back else ''}"
            f'<p class="problem">{e(why)}</p></div>')


def example_card(item: dict[str, Any], labels: Sequence[str]) -> str:
    """One failing transformed case: as sent, and its minimal example."""
    name = item.get("id") or f"{item.get('property')}/{item.get('case_id')}"
    body = example_part(item, labels, "as sent")
    reduced = item.get("reduced")
    if reduced:
        calls = reduced.get("backend_calls")
        note = f" ({counted(calls, 'minimisation call')})" if calls is not None else ""
        body += example_part(reduced, labels, f"minimal example{note}")
    return (f'<div class="example"><b>{e(name)}</b> · case {e(item.get("case_id"))}'
            f'<div class="parts">{body}</div></div>')


def more_cases(items: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    """The rest of a property's failing cases, one table row each, behind a disclosure."""
    shown = items[:MAX_ROWS]
    rows = ((e(i.get("id") or i.get("case_id")), e("; ".join(problems(i))),
             e(", ".join(s for s, _ in shown_pairs(i, labels))), clip(i.get("input"), 300))
            for i in shown)
    rest = "" if len(items) == len(shown) else (
        f'<p class="muted">{len(items) - len(shown)} more in the report JSON.</p>')
    return (f"<details><summary>{counted(len(items), 'more failing case')}</summary>"
            f"{table(('case', 'problem', 'labels shown', 'input'), rows)}{rest}</details>")


def failing_examples(properties: Properties, labels: list[str]) -> str:
    """One card per property: how many of its transformed cases fail, the first
    `FIRST_CASES` in full, the rest behind a disclosure (all of them are in the JSON)."""
    groups = failures_by_property(properties)
    if not groups:
        return ""
    listed = sum(len(items) for _, items in groups)
    total = listed if properties.n_failures is None else properties.n_failures
    parts = [f"<h3>Failing transformed cases ({total})</h3>"]
    for name, items in groups:
        cards = "".join(example_card(item, labels) for item in items[:FIRST_CASES])
        rest = items[FIRST_CASES:]
        parts.append(f'<div class="group"><h4>{e(name)}: '
                     f"{e(counted(len(items), 'failing case'))}</h4>{cards}"
                     f"{more_cases(rest, labels) if rest else ''}</div>")
    return "".join(parts)


def interval_text(item: dict[str, Any]) -> str:
    return bounds(item.get("ci_low"), item.get("ci_high"))


def diagnostics_view(diagnostics: Diagnostics) -> str:
    parts = []
    stability = diagnostics.stability
    if stability:
        epsilon = stability.epsilon
        top = nice_max(max(stability.ci_high, epsilon) * 1.2)
        parts.append("<h3>Rerun stability</h3>" + plots(table(
            ("verdict", "pairs", "flips", "flip rate", "95% per side", "ε"),
            [(e(stability.verdict), val(stability.pairs), val(stability.flips),
              val(stability.flip_rate), bounds(stability.ci_low, stability.ci_high),
              val(epsilon))]),
            hbar_chart(
            [BarRow("rerun flip rate", (Bar(stability.flip_rate, stability.ci_low,
                                            stability.ci_high),))],
            ("flip rate",), "Stability meter (95% interval vs ε)", domain_max=min(top, 1.0),
            marker=epsilon, marker_label=f"ε {epsilon:g}", kind="stability")))
        if stability.advice:
            parts.append(f'<p class="muted">{e(stability.advice)}</p>')
    blindness = diagnostics.blindness
    if blindness:
        state = "BLIND" if blindness.blind else "not blind"
        parts.append(f"<h3>Blindness: {e(state)}</h3>" + plots(table(
            ("skew", "modal label", "distinct labels", "inputs", "threshold"),
            [(val(blindness.skew), val(blindness.modal_label), val(blindness.distinct),
              val(blindness.n), val(blindness.threshold))]), hbar_chart(
            [BarRow(f"share of '{blindness.modal_label}'", (Bar(blindness.skew),))],
            ("skew",), "Label skew", marker=blindness.threshold,
            marker_label=f"blind at {number(blindness.threshold)}", kind="blindness")))
    if diagnostics.guidance:
        parts.append(f"<p><b>Oracle guidance:</b> {e(diagnostics.guidance)}</p>")
    if diagnostics.counterfactual and diagnostics.counterfactual.axes:
        parts.append(axes_view(diagnostics.counterfactual.to_dict()))
    unexercised = diagnostics.not_exercised or []
    if unexercised:
        parts.append("<h3>Not exercised (n/a, not a pass)</h3>" + table(
            ("name", "reason"), ((e(i.name), e(i.reason)) for i in unexercised)))
    return section("Diagnostics", *parts)


def axes_view(counterfactual: dict[str, Any]) -> str:
    """Per persona axis: the case-level excess over placebo flips with its one-sided bounds
    against the limit, the tests beside it and what the verdict rests on (decflow/1 reports:
    the attributable flip rate)."""
    axes = counterfactual["axes"]
    limit = counterfactual.get("max_flip_rate")
    top = nice_max(max([a.get("ci_high") or 0.0 for a in axes] + [limit or 0.0]) * 1.1)
    rows = []
    for a in axes:
        direction = a.get("direction") or {}
        stated = direction.get("statement") if direction.get("significant", True) else None
        mcnemar = (
            None if a.get("mcnemar_p") is None
            else f"McNemar {a.get('mcnemar_b')}:{a.get('mcnemar_c')} p {number(a['mcnemar_p'])} "
            f"(Holm {number(a.get('mcnemar_p_holm'))})"
        )
        sign = (
            None if not direction
            else f"sign test over cases p {number(direction.get('p_value'))} "
            f"(Holm {number(direction.get('p_holm'))})"
        )
        notes = "; ".join(str(n) for n in (stated, mcnemar, sign, a.get("evidence"),
                                           a.get("note")) if n)
        rows.append((e(a["axis"]), val(axis_base(a)), val(a.get("flips")),
                     val(a.get("placebo_flips")), val(a.get("cases")), val(axis_rate(a)),
                     interval_text(a), val(a.get("p_holm")), val(a.get("score")),
                     e(axis_verdict(a)), e(notes)))

    def shown(value: float | None) -> float | None:
        return None if value is None else max(0.0, value)  # the chart starts at 0

    chart = hbar_chart(
        [BarRow(a["axis"], (Bar(shown(axis_rate(a)), shown(a.get("ci_low")),
                                shown(a.get("ci_high")),
                                note=f"{a.get('cases', a.get('attributable'))}"),
                            Bar(a.get("flip_rate"))))
         for a in axes],
        ("excess over placebo (one-sided 95% bounds)", "all cross flips"), "Per-axis excess",
        domain_max=min(top, 1.0), marker=limit,
        marker_label="" if limit is None else f"limit {limit:g}", kind="axes")
    return "<h3>Counterfactual axes</h3>" + table(
        ("axis", "pairs", "flips", "placebo flips", "cases", "excess (or rate)", "bounds",
         "p (Holm)", "score", "verdict", "evidence and tests"), rows) + plots(chart)


def golden_failures(report: RunView) -> str:
    items = report.failures
    if not items:
        return ""
    shown = items[:MAX_ROWS]
    rows = ((e(i["case_id"]), e(i["kind"] + (" (cached)" if i.get("cache_entry") else "")),
             val(i.get("expected")), val(i.get("selected")),
             val(i.get("confidence")), val(i.get("error")), clip(i["input"], 400)) for i in shown)
    return section(f"Golden failures ({len(shown)} of {len(items)})", table(
        ("case", "kind", "expected", "selected", "confidence", "error", "input"), rows))


def artifacts(report: Report) -> str:
    stored = report.run.artifacts if report.run else None
    if not stored:
        return ""
    return section("Artifacts", table(("stage", "path", "rows", "sha256"), (
        (e(name), f"<code>{e(a.path)}</code>", val(a.rows),
         f"<code>{e(short_hash(a.sha256))}</code>")
        for name, a in stored.items())))


SEQUENTIAL_KEYS = ("calls_made", "calls_full", "calls_from_cache", "cases_sent",
                   "suite_cases", "stop_reason", "seconds_saved", "money_saved",
                   "price_per_call", "alpha", "alpha_per_gate", "seed", "seed_from",
                   "batch")


def sequential_view(run: Sequential) -> str:
    """A sequential run: calls against the full suite's, why it stopped, and per gate the
    cases used, estimate, time-uniform interval and e-values. What the run did not record
    (no price per call: no money saved) is left out, not shown as n/a."""
    given = run.to_dict()
    summary = {key: given[key] for key in SEQUENTIAL_KEYS if given.get(key) is not None}
    rows = ((e(g.gate), e(g.decision or "undecided"), val(g.cases_used),
             val(g.estimate), e(gate_interval(g, run).strip()),
             e(e_cell(g.e_fail)), e(e_cell(g.e_pass)),
             e(g.stop_reason + (f"; zero_limit: {g.zero_limit}" if g.zero_limit else "")))
            for g in run.gates)
    return section("Sequential run", kv_table(summary), table(
        ("gate", "decision", "cases used", "estimate", f"interval ({time_uniform(run)})",
         "e (fail)", "e (pass)", "stop"), rows))


def run_body(report: RunView) -> tuple[str, list[str]]:
    title = f"{report.contract.name if report.contract else 'decflow'} · decflow {report.mode}"
    parts = [banner(report, title), identity(report), gates(report)]
    if report.sequential is not None:
        parts.append(sequential_view(report.sequential))
    if report.call_cache is not None:
        parts.append(section("Call cache", "".join(
            f"<p>{e(line)}</p>" for line in cache_lines(report.call_cache))))
    golden = shown_golden(report)
    if golden is not None:
        parts.append(golden_metrics(report, golden))
    # Diagnostics first: they say how far the property results can be trusted.
    if report.diagnostics is not None and report.diagnostics.given():
        parts.append(diagnostics_view(report.diagnostics))
    if report.properties is not None:
        parts.append(properties_view(report.properties, labels_of(report)))
    if golden is not None:
        parts.append(golden_failures(report))
    parts.append(artifacts(report))
    return title, parts


# -- diff and check reports -------------------------------------------------------------


# Diff metrics that are rates on [0, 1] (Brier, NLL, MAE and latency are not).
RATE_METRICS = ("accuracy", "macro_f1", "ece", "coverage", "abstention_rate",
                "selective_accuracy", "error_rate")


def diff_body(report: DiffView) -> tuple[str, list[str]]:
    title = "decflow diff"
    metrics = report.metrics
    rates = [(n, metrics[n]) for n in RATE_METRICS if n in metrics]
    metric_chart = hbar_chart(
        [BarRow(n, (Bar(m.baseline), Bar(m.candidate))) for n, m in rates],
        ("baseline", "candidate"), "Metrics: baseline vs candidate", kind="diff-metrics",
    ) if rates else ""
    shift = plots(kv_table(report.counts.to_dict(), ("count", "value")),
                  kv_table(report.shift.to_dict()))
    metric_table = table(("metric", "baseline", "candidate", "delta"), (
        (e(words(n)), val(m.baseline), val(m.candidate), val(m.delta))
        for n, m in metrics.items()))
    # checks and changed cases first: what an on-call reader acts on
    parts = [banner(report, title), identity(report), gates(report), changed_cases(report),
             evidence_section(report.evidence), section("Shift", shift),
             section("Metrics", metric_table, plots(metric_chart))]
    segments = report.segments
    if segments:
        rows = [s.to_dict() for s in segments]
        columns = [k for k in rows[0] if k not in ("key", "value")]
        chart = hbar_chart(
            [BarRow(f"{s.key}={s.value}", (Bar(s.baseline_accuracy), Bar(s.candidate_accuracy)))
             for s in segments],
            ("baseline accuracy", "candidate accuracy"), "Segment accuracy", kind="segments")
        parts.append(section("Segments", table(("segment", *map(words, columns)), (
            (e(f"{row['key']}={row['value']}"), *(val(row[c]) for c in columns))
            for row in rows)), plots(chart)))
    trend = (report.model_extra or {}).get("trend")
    if trend:
        parts.append(trend_section(trend))
    return title, parts


def evidence_section(evidence: DiffEvidence | None) -> str:
    """How the diff was gated, the rerun noise, each gate's decision with its interval."""
    from decflow.views.diff_evidence import evidence_table, gating_line, noise_line

    gating = gating_line(evidence)
    if gating is None:
        return ""
    headers, rows = evidence_table(evidence)
    return section(
        "Evidence", f"<p>{e(gating)}</p><p>Rerun noise: {e(noise_line(evidence))}</p>",
        table(headers, [tuple(e(c) for c in row) for row in rows]))


def trend_stack(cell: dict[str, Any] | None) -> str:
    """A run's value of a gate, its interval and status, one above the other."""
    if cell is None:
        return "-"
    parts = [val(cell["value"]), e(interval(cell["low"], cell["high"])),
             e(status_label(cell["status"]))]
    return "<br>".join(p for p in parts if p)


def trend_section(trend: dict[str, Any]) -> str:
    """The decision's last runs (columns, oldest first; * = accepted baseline) by gated
    metric (rows: value, 95% interval and status stacked): a run with many gates adds
    rows, not width."""
    runs = trend["runs"]
    heads = "".join(
        f"<th>{'* ' if run['accepted'] else ''}{e(run['run_id']).replace('-', '-<wbr>')}"
        f'<br><span class="muted">{e(run["status"].upper())}</span></th>' for run in runs)
    rows = "".join(
        f"<tr><td>{e(gate)}</td>"
        + "".join(f"<td>{trend_stack(run['gates'].get(gate))}</td>" for run in runs) + "</tr>"
        for gate in trend["gates"])
    note = (f"<p>The last {len(runs)} runs of {e(trend['decision'])} on "
            f"{e(trend['backend'] or 'every backend')}, oldest first; * marks the accepted "
            "baseline; intervals are 95% per side.</p>")
    return section("Trend", note, f"<table><thead><tr><th>gate</th>{heads}</tr></thead>"
                                  f"<tbody>{rows}</tbody></table>")


def changed_cases(report: DiffView) -> str:
    changes = report.changes
    if not changes:
        return ""
    shown = changes[:MAX_ROWS]
    rows = ((e(c.get("case_id")), e(str(c.get("kind", "")).replace("_", " ")),
             e(answer(c.get("baseline_selected"), c.get("baseline_confidence"))),
             e(answer(c.get("candidate_selected"), c.get("candidate_confidence"))),
             val(c.get("expected")), e(c.get("error") or ""), clip(c.get("input"), 400))
            for c in shown)
    return section(f"Changed cases ({len(shown)} of {len(changes)})", table(
        ("case", "change", "baseline", "candidate", "expected", "error", "input"), rows))


def check_body(typed: CheckView) -> tuple[str, list[str]]:
    title = "decflow check"
    metrics = typed.metrics
    groups: list[tuple[str, Open | None]] = [
        ("counts", metrics.counts), ("outcomes", metrics.outcomes),
        ("calibration", metrics.calibration), ("confidence", metrics.confidence),
        ("threshold", metrics.threshold), ("routing", metrics.routing),
        ("latency_ms", metrics.latency_ms), ("cost", metrics.cost)]
    shown = [(name, {k: v for k, v in group.to_dict().items()
                     if v is not None and not isinstance(v, dict | list)})
             for name, group in groups if group is not None]
    tables = "".join(f"<div><h3>{e(words(n))}</h3>{kv_table(g)}</div>" for n, g in shown if g)
    parts = [banner(typed, title), identity(typed), gates(typed),
             section("Metrics", plots(tables))]
    if metrics.calibration.reliability:
        threshold = None if metrics.threshold is None else metrics.threshold.threshold
        parts.append(section("Calibration", calibration_plots(
            metrics.calibration.reliability, metrics.confidence.histogram, threshold)))
    drift = typed.drift.to_dict()
    if drift:
        measured = any(v is not None for v in drift.values())
        note = "" if measured else '<p class="muted">No baseline: drift was not measured.</p>'
        parts.append(section("Drift against the baseline", note, kv_table(drift)))
    if typed.segments:
        parts.append(check_segments(failing_segments_first(typed.segments)))
    return title, parts


def check_segments(segments: list[Segment]) -> str:
    def limit(segment: Segment) -> float | None:
        found = [c.threshold for c in segment.checks if c.gate.endswith(".min_accuracy")]
        return found[0] if found else None

    rows = []
    for s in segments:
        m = s.metrics
        failing = [c.message for c in s.checks if c.status != "pass"]
        rows.append((e(f"{s.key}={s.value}"), pill(s.status), val(m.counts.total),
                     val(m.outcomes.accuracy), val(m.calibration.ece),
                     val(None if m.threshold is None else m.threshold.coverage),
                     val(m.routing.fallback_rate), "<br>".join(e(f) for f in failing)))
    chart = hbar_chart(
        [BarRow(f"{s.key}={s.value}", (Bar(s.metrics.outcomes.accuracy),), limit(s))
         for s in segments],
        ("accuracy",), "Segment accuracy (red: segment min_accuracy)", kind="segments")
    return section("Segments", table(
        ("segment", "status", "records", "accuracy", "ECE", "coverage", "fallback rate",
         "failing checks"), rows, (s.status for s in segments)), plots(chart))


def monitor_body(typed: MonitorReport) -> tuple[str, list[str]]:
    """A monitor run: the monitor and what this run read, a chart per gated metric window
    by window, and the windows newest first with their runs."""
    from decflow.views.monitor_charts import gate_charts
    from decflow.views.monitor_text import open_gates, read_line, shift_line

    monitor = typed.monitor
    facts = {"monitor": monitor.id, "source": monitor.source, "labels": monitor.labels,
             "window": monitor.window, "baseline": (monitor.baseline or {}).get("path"),
             "this run": read_line(typed.this_run), "harmful shift": shift_line(typed)}
    parts = [banner(typed, "decflow monitor"),
             section("Monitor", kv_table(facts))]
    if typed.windows:
        checked = set(typed.checked)
        newest = list(reversed(typed.windows))
        rows = [(e(w.name) + (" *" if w.name in checked else ""), pill(w.status),
                 e(w.n_records), e(w.n_labelled), e(w.reason),
                 e(", ".join(w.superseded) or "–"), e(w.run_id), e(open_gates(w)))
                for w in newest]
        parts.append(section("Gated metrics, window by window", plots(*gate_charts(typed))))
        parts.append(section("Windows (newest first; * checked by this run)", table(
            ("window", "status", "records", "labelled", "last judged for", "superseded runs",
             "run", "open gates"), rows, (w.status for w in newest))))
    return "decflow monitor", parts


def probe_body(report: Report) -> tuple[str, list[str]]:
    """A probe: its verdict, then the text view's sections as they print."""
    from decflow.views.probe_text import render_probe

    document = report.to_dict()
    title = f"decflow probe · {(document.get('settings') or {}).get('agent', 'agent')}"
    return title, [banner(report, title),
                   section("Probe", f"<pre>{e(render_probe(document))}</pre>")]


def body(report: Report) -> tuple[str, list[str]]:
    """The page's title and sections, by the report's model."""
    if is_diff(report):
        return diff_body(report)
    if is_check(report):
        return check_body(report)
    if is_monitor(report):
        return monitor_body(report)
    if is_run(report):
        return run_body(report)
    return probe_body(report)


def render_html(shown: Report | dict[str, Any]) -> str:
    """The whole self-contained HTML page of a run, diff, check, probe or monitor report (a
    report dict is read as its kind's model first)."""
    report = view_model(shown)
    title, parts = body(report)
    version = (report.model_extra or {}).get("decflow_version") or __version__
    footer = (f"<footer>decflow {e(version)} · report "
              f"{e(report.report_version or 'decguard 0.1')}</footer>")
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(report.first_line())} · {e(title)}</title>"
        f"<style>{CSS}</style></head><body><main>{''.join(parts)}{footer}</main></body>"
        "</html>\n"
    )
    # One pass over the page, as the text view does per line: no piece of report text can
    # slip past it; the page itself spells no control character but newlines.
    return escape(page, keep_newlines=True)
