"""The text view's property block and property failure list (`sent:` / `minimal:` lines)."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import number
from decflow.report.run_report import RunView
from decflow.report.sections import failures_by_property, labels_of
from decflow.views.text import FIRST_CASES, MAX_LISTED, counted, percent, preview


def _shown(item: dict[str, Any], labels: list[str]) -> str:
    presentation = item.get("presentation")
    shown = [pair[0] for pair in presentation] if presentation else labels
    return "[" + ", ".join(shown) + "]"



def properties_block(report: RunView) -> list[str]:
    properties = report.properties
    if properties is None:
        return []
    labels = labels_of(report)
    lines = ["", f"  Properties   seed {properties.seed}"]
    for s in properties.summaries:
        note = ""
        if s.rerun_evidence:
            note = "  (identity: rerun evidence, not a paraphrase test)"
        lines.append(
            f"    {s.property:<20} {s.n_evaluated} compared · {s.n_violations} violating "
            f"({percent(s.violation_rate)}) · {s.n_flips} flips · "
            f"max TV {number(s.max_tv_distance)}"
            + (f" · {s.n_errors} errored" if s.n_errors else "")
            + (f" · {s.n_skipped} skipped" if s.n_skipped else "")
            + note
        )
        for evidence in properties.rate_evidence:
            if evidence.gate.split(".")[0] == s.property:
                lines.append(
                    f"    {'':<20} {evidence.gate.split('.', 1)[1]}: {evidence.statement}")
    skipped = properties.skipped
    if skipped:
        lines.append(f"  Skipped ({min(len(skipped), MAX_LISTED)} of {len(skipped)})")
        for item in skipped[:MAX_LISTED]:
            lines.append(f"    {item['property']}/{item['case_id']}: {item['reason']}")
    groups = failures_by_property(properties)
    if groups:
        listed = sum(len(items) for _, items in groups)
        total = listed if properties.n_failures is None else properties.n_failures
        lines.append(f"  Property failures ({total}; the first {FIRST_CASES} of each property)")
    for name, items in groups:
        lines.append(f"    {name}: {counted(len(items), 'failing case')}")
        for item in items[:FIRST_CASES]:
            if item.get("error"):
                problem = f"{item['error']['kind']}: {item['error']['message']}"
            else:
                problem = "; ".join(item["violations"])
            lines.append(f"      {item['id']}: {problem}")
            lines.append(f"        sent:    {_shown(item, labels)} {preview(item['input'])}")
            reduced = item.get("reduced")
            if reduced:
                lines.append(
                    f"        minimal: {_shown(reduced, labels)} {preview(reduced['input'])} "
                    f"({counted(reduced['backend_calls'], 'call')})"
                )
        if len(items) > FIRST_CASES:
            lines.append(f"      … {len(items) - FIRST_CASES} more in the report JSON")
    return lines
