"""The probe's text report, diagnostics first: meter, blindness, oracle guidance, then the
relations, naming those that were never exercised. Rendered from the JSON report, so a
stored probe (`decflow report RUN`) prints exactly what the run printed.
"""

from __future__ import annotations

import textwrap
from typing import Any

from decflow.gates.headline import number
from decflow.untrusted import escape
from decflow.views.text import percent

RULE = "=" * 60
_INDENT = "   "
_LABEL = 13
_WIDTH = 78
_LAYER_NOUNS = {"verdict": "verdicts", "text": "texts", "tools": "tool sequences"}
_COLUMNS = (("relation", 30, "<"), ("type", 12, "<"), ("held", 6, ">"), ("violated", 10, ">"),
            ("skipped", 8, ">"), ("errors", 8, ">"), ("rate", 8, ">"), ("95%/side", 16, ">"))


def _field(label: str, text: str) -> list[str]:
    head = f"{_INDENT}{label + ':':<{_LABEL}}"
    return textwrap.wrap(text, _WIDTH, initial_indent=head,
                         subsequent_indent=" " * len(head)) or [head]


def _paragraph(text: str) -> list[str]:
    return textwrap.wrap(text, _WIDTH - 8, initial_indent=_INDENT, subsequent_indent=_INDENT)


def _meter(report: dict[str, Any]) -> list[str]:
    meter, settings = report["meter"], report["settings"]
    lines = ["1. RERUN STABILITY METER"]
    lines += _field("call", meter["verdict"])
    lines += _field("flip rate", f"{percent(meter['flip_rate'] or 0.0)} "
                                 f"({meter['flips']}/{meter['pairs']} pairs)")
    lines += _field("bounds", f"[{number(meter['ci_low'])}, {number(meter['ci_high'])}] "
                              f"(95% per side, input as unit) at epsilon={meter['epsilon']:g}")
    lines += _field("inputs", f"{report['inputs']}, repeats: {settings['repeats']}, "
                              f"layer: {settings['layer']}")
    if meter["n_incomplete"]:
        lines += _field("incomplete", f"{meter['n_incomplete']} input(s) left out of the "
                                      "interval because a rerun errored")
    lines += _field("advice", meter["advice"])
    return lines


def _blindness(report: dict[str, Any]) -> list[str]:
    blindness = report["blindness"]
    lines = ["2. BLINDNESS DETECTOR"]
    if blindness["skew"] is None:
        return lines + _field("call", "not measured: every first draw errored")
    label, share = blindness["modal_label"], percent(blindness["skew"])
    noun = _LAYER_NOUNS[report["settings"]["layer"]]
    lines += _field("call", "BLIND" if blindness["blind"] else "ok")
    lines += _field("skew", f"{share} ('{label}' on {blindness['n']} inputs)")
    lines += _field("distinct", f"{blindness['distinct']} {noun}")
    if blindness["blind"]:
        lines += _field("warning", (
            f"the agent answers '{label}' on {share} of inputs (threshold "
            f"{blindness['threshold']:g}). Relation passes may be trivial because the inputs "
            "rarely cross a decision boundary; a green result is not evidence of correct "
            "behaviour here."))
    return lines


def _interval(relation: dict[str, Any]) -> str:
    """The rate's one-sided 95 % bounds (reports stored before they were added show n/a)."""
    low, high = relation.get("ci_low"), relation.get("ci_high")
    return "n/a" if low is None or high is None else f"[{number(low)}, {number(high)}]"


def _table(relations: list[dict[str, Any]]) -> list[str]:
    def row(values: list[str]) -> str:
        return _INDENT + " ".join(f"{v:{align}{width}}"
                                  for v, (_, width, align) in zip(values, _COLUMNS, strict=True))

    lines = [row([name for name, _, _ in _COLUMNS]),
             row(["-" * width for _, width, _ in _COLUMNS])]
    for r in relations:
        lines.append(row([r["name"], r["type"], str(r["held"]), str(r["violated"]),
                          str(r["skipped"]), str(r["errors"]), percent(r["violation_rate"]),
                          _interval(r)]))
    return lines


def _relations(report: dict[str, Any]) -> list[str]:
    relations = report["relations"]
    lines = ["4. RELATION RESULTS"]
    if not relations:
        return [*lines, f"{_INDENT}none requested (diagnostics only)"]
    lines += _table(relations)
    vacuous = [r["name"] for r in relations if r["vacuous"]]
    partial = [r for r in relations if not r["vacuous"] and r["skipped"]]
    if vacuous:
        lines.append("")
        lines += _paragraph(
            f"NOT EXERCISED: {', '.join(vacuous)}. The transform returned every input "
            "unchanged (or every pair errored), so the agent was never asked a different "
            "question. Rows marked n/a are not evidence of anything. Add inputs the "
            "transform actually changes.")
    for r in partial:
        lines += _paragraph(f"PARTIAL: {r['name']} ran on {r['exercised']}/{r['total']} "
                            f"inputs ({r['skipped']} left unchanged by the transform)")
    if report["meter"]["verdict"] == "stochastic" and any(r["violated"] for r in relations):
        lines += _paragraph("The meter says stochastic: read violation rates against the "
                            "rerun flip rate above, not against zero.")
    return lines


def _result(report: dict[str, Any]) -> list[str]:
    calls = report["calls"]
    other = ("without call reuse" if report["settings"]["reuse_calls"]
             else "with call reuse")
    alternative = calls["without_reuse" if report["settings"]["reuse_calls"] else "with_reuse"]
    lines = ["5. RESULT"]
    lines += _field("agent calls", f"{calls['made']} ({alternative} {other})")
    if calls["errors"]:
        lines += _field("errors", f"{calls['errors']} call(s) failed: {calls['first_error']}")
    reasons = []
    if report["blindness"]["blind"]:
        reasons.append("the agent is blind on these inputs")
    violated = [r["name"] for r in report["relations"] if r["violated"]]
    if violated:
        reasons.append(f"violated: {', '.join(violated)}")
    vacuous = [r["name"] for r in report["relations"] if r["vacuous"]]
    if vacuous and not reasons:
        reasons.append(f"not established: {', '.join(vacuous)} changed no input")
    verdict = "; ".join(reasons) if reasons else "no blindness, no violated relation"
    lines += _field("status", f"{report['status']} — {verdict} (exit {report['exit_code']})")
    if not report["suite_is_meaningful"]:
        lines += _field("note", "green relation results here are vacuous (blind agent, or no "
                                "relation changed any input)")
    run = report.get("run") or {}
    if run.get("id"):
        lines.append(f"{_INDENT}{'run:':<{_LABEL}}{run['id']}")
    return lines


def render_probe(report: dict[str, Any]) -> str:
    # the headline leads (reports stored before it was written by `gates.headline` show
    # the line they stored)
    head = [report.get("headline") or report["status"].upper(), "",
            RULE, "decflow probe — suite-quality report", RULE,
            f"agent: {report['settings']['agent']}", ""]
    sections = [_meter(report), _blindness(report),
                ["3. ORACLE GUIDANCE", *_paragraph(report["guidance"])],
                _relations(report), _result(report)]
    body: list[str] = []
    for section in sections:
        body += [*section, ""]
    # Lines quote the agent's answers and errors: shown escaped, one line each.
    return "\n".join(escape(line) for line in head + body)
