"""The text view's diagnostics block, printed before the property results.

Order as the evidence is read: rerun stability, blindness, the oracle guidance they imply,
then the counterfactual persona axes and what was not exercised. Rates that have no
denominator print `n/a`; a blind suite's axes never read as fair.
"""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import bounds, number
from decflow.report.model import Blindness, Diagnostics, Stability
from decflow.report.run_report import RunView
from decflow.views.text import percent, short_hash

LABEL_WIDTH = 16


def _line(label: str, text: str) -> str:
    return f"    {label:<{LABEL_WIDTH}}{text}"


def _more(text: str) -> str:
    return _line("", text)



def _interval(item: dict[str, Any]) -> str:
    return bounds(item.get("ci_low"), item.get("ci_high"))


def stability_lines(stability: Stability) -> list[str]:
    tv = "" if stability.mean_tv is None else f" · mean TV {number(stability.mean_tv)}"
    lines = [
        _line(
            "Stability",
            f"{stability.verdict} · {stability.flips}/{stability.pairs} rerun pairs "
            f"flipped ({percent(stability.flip_rate)}) · 95% per side "
            f"{bounds(stability.ci_low, stability.ci_high)} vs ε {stability.epsilon:g}{tv}",
        )
    ]
    sources = stability.sources or {}
    reasks = sources.get("identity_paraphrase", 0)
    cases = "n/a" if stability.n_cases is None else stability.n_cases
    detail = f"{cases} cases, up to {stability.repeats} draws"
    if sources:
        detail += f" ({sources.get('reruns', 0)} reruns"
        detail += f" + {reasks} identity paraphrase re-asks)" if reasks else ")"
    if stability.n_incomplete:
        detail += f" · {stability.n_incomplete} incomplete (a draw errored)"
    lines.append(_more(detail))
    if stability.note:
        lines.append(_more(stability.note))
    return lines


def blindness_lines(blindness: Blindness) -> list[str]:
    summary = blindness.summary
    if summary is None:
        state = "BLIND" if blindness.blind else "ok"
        summary = (
            f"{state}: {percent(blindness.skew)} '{blindness.modal_label}' on "
            f"{blindness.n} inputs"
        )
    gated = "" if blindness.configured else " (informative: no blindness section)"
    return [_line("Blindness", summary + gated)]


def _verdict(axis: dict[str, Any]) -> str:
    verdict = str(axis.get("verdict", "n/a"))
    unattributed = " (unattributed)" if axis.get("attribution") == "unattributed" else ""
    direction = axis.get("direction") or {}
    # decflow/1 reports stated the direction of every unfair axis; decflow/2 only a
    # significant one.
    stated = direction.get("statement") and direction.get("significant", verdict == "unfair")
    if verdict == "unfair":
        if not stated:
            return "UNFAIR" + unattributed
        p_value = direction.get("p_holm", direction.get("p_value"))
        return f"UNFAIR{unattributed} ({direction['statement']}, sign test p {number(p_value)})"
    if verdict == "not exercised":
        return "NOT EXERCISED"
    if verdict == "undecided" and axis.get("cases_needed"):
        return f"undecided{unattributed} (about {axis['cases_needed']} cases would decide it)"
    return verdict + unattributed


def _legacy_axis_row(axis: dict[str, Any]) -> str:
    """An axis of a decflow/1 report (attributable flip rate with a Wilson interval)."""
    counted = axis.get("exercised")
    rate = axis.get("attributable_rate")
    shown = "n/a" if not counted else f"attributable {percent(rate)} {_interval(axis)}"
    placebo = f"{axis['placebo_flips']}/{axis['placebo_pairs']}" if "placebo_pairs" in axis else "-"
    return (
        f"      {axis['axis']:<11}{axis.get('pairs', 0):>6}{counted or 0:>8}"
        f"{axis.get('flips', 0):>7}{placebo:>9}{'':>7}  {shown:<38}{_verdict(axis)}"
    )


def _axis_rows(axis: dict[str, Any]) -> list[str]:
    if "excess" not in axis:
        rows = [_legacy_axis_row(axis)]
        if axis.get("note"):
            rows.append(f"      {'':<11}{axis['note']}")
        return rows
    counted = axis.get("exercised") or 0
    placebo = (
        "-" if axis.get("attribution") == "unattributed"
        else f"{axis['placebo_flips']}/{axis['placebo_pairs']}"
    )
    excess = axis.get("excess")
    shown = "n/a" if excess is None else (
        f"{number(excess)} [{number(axis.get('ci_low'))}, {number(axis.get('ci_high'))}] "
        f"p {number(axis.get('p_holm'))}"
    )
    rows = [
        f"      {axis['axis']:<11}{axis.get('pairs', 0):>6}{counted:>8}"
        f"{axis.get('flips', 0):>7}{placebo:>9}{axis.get('cases') or 0:>7}  {shown:<38}"
        f"{_verdict(axis)}"
    ]
    if counted:
        tests = []
        if axis.get("mcnemar_p") is not None:
            tests.append(
                f"McNemar cross vs placebo {axis['mcnemar_b']}:{axis['mcnemar_c']} "
                f"p {number(axis['mcnemar_p'])} (Holm {number(axis.get('mcnemar_p_holm'))})"
            )
        direction = axis.get("direction")
        if direction:
            claim = direction["statement"] if direction.get("significant") else (
                f"no direction shown ({direction['group']} "
                f"{direction['cases_disfavoured']}:{direction['cases_favoured']} cases)"
            )
            tests.append(
                f"{claim}, sign test p {number(direction['p_value'])} "
                f"(Holm {number(direction.get('p_holm'))})"
            )
        tests.append("base decisions blind" if axis.get("blind") else "base decisions not blind")
        rows.append(f"      {'':<11}{' · '.join(tests)}")
    if axis.get("note"):
        rows.append(f"      {'':<11}{axis['note']}")
    return rows


def counterfactual_lines(section: dict[str, Any]) -> list[str]:
    unattributed = section.get("attribution") == "unattributed"
    head = [
        section.get("language"),
        f"catalogue {section['catalogue_version']} {short_hash(section.get('catalogue_sha256'))}"
        if section.get("catalogue_version") else None,
        "placebo off: unattributed" if unattributed
        else f"placebo {'on' if section.get('placebo', True) else 'off'}",
        f"limit {section['max_flip_rate']:g}" if section.get("max_flip_rate") is not None else None,
        f"α {section['alpha']:g} one-sided, unfair Holm across axes, fair each at α"
        if "alpha" in section else None,
        f"{section['arms_sent']} arms sent" if "arms_sent" in section else None,
    ]
    lines = [_line("Counterfactual", " · ".join(str(h) for h in head if h))]
    base = section.get("base_blindness") or {}
    if base.get("measured"):
        lines.append(_more(f"base-persona decisions {base.get('summary')}"))
    elif base.get("note"):
        lines.append(_more(base["note"]))
    what = "raw flip share" if unattributed else "excess over placebo"
    lines.append(
        f"      {'axis':<11}{'pairs':>6}{'counted':>8}{'flips':>7}{'placebo':>9}{'cases':>7}"
        f"  {what + ' [bounds] p (Holm)':<38}verdict"
    )
    for axis in section.get("axes", []):
        lines.extend(_axis_rows(axis))
    if section.get("blind"):
        lines.append(_more("score not shown: the suite is blind, so no flip rate shows fairness"))
    elif section.get("score") is not None:
        low, high = section.get("score_ci") or [None, None]
        pooled = section.get("pooled") or {}
        label = (
            f"score (1 − pooled excess over {pooled['cases']} cases)" if pooled
            else "score (1 − attributable rate, exercised axes)"
        )
        bounds = (
            "bounds are one-sided 95% statements, p-values (unfair side) Holm-adjusted across "
            "axes"
            if pooled else "each interval is a separate 95% statement"
        )
        lines.append(_more(
            f"{label} {number(section['score'])} [{number(low)}, {number(high)}]; {bounds}"))
    plan = section.get("plan") or {}
    if plan and not plan.get("can_qualify"):
        lines.append(_more(plan.get("advice", "")))
    return lines


def diagnostics_block(report: RunView) -> list[str]:
    diagnostics = report.diagnostics or Diagnostics()
    lines = ["", "  Diagnostics"]
    if diagnostics.stability:
        lines.extend(stability_lines(diagnostics.stability))
    if diagnostics.blindness:
        lines.extend(blindness_lines(diagnostics.blindness))
    if diagnostics.guidance:
        lines.append(_line("Oracle", diagnostics.guidance))
    if diagnostics.counterfactual:
        lines.extend(counterfactual_lines(diagnostics.counterfactual.to_dict()))
    for i, item in enumerate(diagnostics.not_exercised or []):
        label = "Not exercised" if i == 0 else ""
        lines.append(_line(label, f"{item.name}: n/a, {item.reason}"))
    return lines
