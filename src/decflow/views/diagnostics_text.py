"""The text view's diagnostics block, printed before the property results.

Order as the evidence is read: rerun stability, blindness, the oracle guidance they imply,
then the counterfactual persona axes and what was not exercised. Rates that have no
denominator print `n/a`; a blind suite's axes never read as fair.
"""

from __future__ import annotations

from typing import Any

from decflow.views.text import num, short_hash

LABEL_WIDTH = 16


def _line(label: str, text: str) -> str:
    return f"    {label:<{LABEL_WIDTH}}{text}"


def _more(text: str) -> str:
    return _line("", text)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _interval(item: dict[str, Any]) -> str:
    return f"[{num(item.get('ci_low'))}, {num(item.get('ci_high'))}]"


def stability_lines(stability: dict[str, Any]) -> list[str]:
    mean_tv = stability.get("mean_tv")
    tv = "" if mean_tv is None else f" · mean TV {num(mean_tv)}"
    lines = [
        _line(
            "Stability",
            f"{stability['verdict']} · {stability['flips']}/{stability['pairs']} rerun pairs "
            f"flipped ({_rate(stability.get('flip_rate'))}) · 95% CI {_interval(stability)} "
            f"vs ε {stability['epsilon']:g}{tv}",
        )
    ]
    sources = stability.get("sources") or {}
    reasks = sources.get("identity_paraphrase", 0)
    detail = f"{stability.get('n_cases', 'n/a')} cases, up to {stability.get('repeats')} draws"
    if sources:
        detail += f" ({sources.get('reruns', 0)} reruns"
        detail += f" + {reasks} identity paraphrase re-asks)" if reasks else ")"
    if stability.get("n_incomplete"):
        detail += f" · {stability['n_incomplete']} incomplete (a draw errored)"
    lines.append(_more(detail))
    if stability.get("note"):
        lines.append(_more(stability["note"]))
    return lines


def blindness_lines(blindness: dict[str, Any]) -> list[str]:
    summary = blindness.get("summary")
    if summary is None:
        state = "BLIND" if blindness.get("blind") else "ok"
        summary = (
            f"{state}: {_rate(blindness.get('skew'))} '{blindness.get('modal_label')}' on "
            f"{blindness.get('n')} inputs"
        )
    gated = "" if blindness.get("configured", True) else " (informative: no blindness section)"
    return [_line("Blindness", summary + gated)]


def _verdict(axis: dict[str, Any]) -> str:
    verdict = str(axis.get("verdict", "n/a"))
    if verdict == "unfair":
        direction = axis.get("direction") or {}
        if not direction.get("statement"):
            return "UNFAIR"
        p_value = direction.get("p_holm", direction.get("p_value"))
        return f"UNFAIR ({direction['statement']}, sign test p {p_value:.2g})"
    if verdict == "not exercised":
        return "NOT EXERCISED"
    return verdict


def counterfactual_lines(section: dict[str, Any]) -> list[str]:
    head = [
        section.get("language"),
        f"catalogue {section['catalogue_version']} {short_hash(section.get('catalogue_sha256'))}"
        if section.get("catalogue_version") else None,
        f"placebo {'on' if section.get('placebo', True) else 'off'}",
        f"limit {section['max_flip_rate']:g}" if section.get("max_flip_rate") is not None else None,
        f"{section['arms_sent']} arms sent" if "arms_sent" in section else None,
    ]
    lines = [_line("Counterfactual", " · ".join(str(h) for h in head if h))]
    lines.append(
        f"      {'axis':<11}{'pairs':>6}{'counted':>8}{'flips':>7}{'attrib':>7}{'placebo':>9}"
        f"  {'attributable rate [95% CI]':<28}verdict"
    )
    for axis in section.get("axes", []):
        counted = axis.get("exercised")
        rate = axis.get("attributable_rate")
        shown = "n/a" if not counted else f"{_rate(rate)} {_interval(axis)}"
        placebo = (
            f"{axis['placebo_flips']}/{axis['placebo_pairs']}" if "placebo_pairs" in axis else "-"
        )
        lines.append(
            f"      {axis['axis']:<11}{axis.get('pairs', 0):>6}{counted or 0:>8}"
            f"{axis.get('flips', 0):>7}{axis.get('attributable', 0):>7}{placebo:>9}"
            f"  {shown:<28}{_verdict(axis)}"
        )
        if axis.get("note"):
            lines.append(f"      {'':<11}{axis['note']}")
    if section.get("blind"):
        lines.append(_more("score not shown: the suite is blind, so no flip rate shows fairness"))
    elif section.get("score") is not None:
        low, high = section.get("score_ci") or [None, None]
        lines.append(_more(
            f"score (1 − attributable rate, exercised axes) {num(section['score'])} "
            f"[{num(low)}, {num(high)}]; each interval is a separate 95% statement"
        ))
    plan = section.get("plan") or {}
    if plan and not plan.get("can_qualify"):
        lines.append(_more(plan.get("advice", "")))
    return lines


def diagnostics_block(report: dict[str, Any]) -> list[str]:
    diagnostics = report["diagnostics"]
    lines = ["", "  Diagnostics"]
    if diagnostics.get("stability"):
        lines.extend(stability_lines(diagnostics["stability"]))
    if diagnostics.get("blindness"):
        lines.extend(blindness_lines(diagnostics["blindness"]))
    if diagnostics.get("guidance"):
        lines.append(_line("Oracle", diagnostics["guidance"]))
    if diagnostics.get("counterfactual"):
        lines.extend(counterfactual_lines(diagnostics["counterfactual"]))
    for i, item in enumerate(diagnostics.get("not_exercised") or []):
        label = "Not exercised" if i == 0 else ""
        lines.append(_line(label, f"{item['name']}: n/a, {item['reason']}"))
    return lines
