"""What the Prefect UI shows of a stored report: the Markdown report artifact, the checks as
table-artifact rows, and where the report is stored.

The Markdown artifact is what an on-call reader opens from a failed flow run, so it leads
with every failing gate and the cases that make it fail (`decflow.report.failing`): all of
them up to `MAX_CASES_PER_GATE` per gate, then how many more and where every one is
stored; then where the report is (with the command that writes its HTML view anywhere), a
compact table of every gate, and the rest of the report's Markdown view. The headline is
the artifact's description (and the flow run's state message), so the artifact does not
repeat it. The Prefect UI shows Markdown tables unwrapped in a column about 860 px wide
at a 1,440 px window: tables here keep short cells, and sentences, paths and inputs are
list items, which wrap.

The UI renders table cells as Markdown, so every cell is Markdown-safe text (comparisons
as words, numbers as the check messages print them). A location is a link only when a
browser can open it; a local store's path is named as text (a `file://` link from a web
page opens nothing).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from decflow.gates.headline import brief, failing_first, number
from decflow.report.failing import FailingGate, failing_gates
from decflow.report.kinds import view_model
from decflow.report.model import Report
from decflow.report.sections import status_label
from decflow.untrusted import escape
from decflow.views.markdown import (
    CHECK_HEADERS,
    COMPARISONS,
    check_cells,
    level_tag,
    md,
    problems,
    sent,
    table,
    titled_sections,
    verdict_lines,
)
from decflow.views.text import answer, counted, preview

# Locations worth a link: web URLs, and object-store URLs (S3 consoles and tools open them);
# never a path on the machine that ran the flow.
LINKABLE_SCHEMES = frozenset({"http", "https", "s3"})
MAX_CASES_PER_GATE = 200  # failing cases listed per gate; then a count and where they are
# Sections of the Markdown view the artifact replaces: its own gate table and the failing
# cases grouped by gate.
REPLACED = ("checks", "failing cases")
# Where every case of a report field is kept, when the report keeps only the first ones.
COMPLETE_IN = {"properties.failures": "comparisons"}


def linkable(location: str) -> bool:
    return urlsplit(location).scheme in LINKABLE_SCHEMES


def check_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The report's checks as rows of the checks table artifact (columns `CHECK_HEADERS`),
    failing checks first."""
    return [check_cells(check) for check in failing_first(Report.view(report).checks)]


def placeholder_rows(message: str) -> list[dict[str, str]]:
    """A checks table saying why there are no checks (it replaces the previous version of
    the artifact, which would otherwise stand as the latest)."""
    return [{**dict.fromkeys(CHECK_HEADERS, "n/a"), "message": md(message)}]


def place(where: str) -> str:
    """A location as Markdown: a link when a browser can open it, else its text."""
    return f"[{md(where)}]({where})" if linkable(where) else md(where)


def stored_block(locations: Mapping[str, str], command: str) -> list[str]:
    """Where the report's files are (`{file name: location}`), and the command that writes
    its HTML view anywhere."""
    lines = ["## Stored", "", *(f"- {md(name)}: {place(where)}"
                                for name, where in locations.items())]
    lines.append(f"- the HTML view, written where you want it: `{command}`")
    return [*lines, ""]


def report_command(report: dict[str, Any], json_location: str) -> str:
    """`decflow report RUN --store STORE --html report.html` for a stored run, else with
    the report file (a diff)."""
    run = Report.view(report).run
    if run is not None and run.id:
        target = [run.id, *(("--store", run.store) if run.store else ())]
    else:
        target = [json_location]
    parts = ["decflow", "report", *target, "--html", "report.html"]
    return " ".join(shlex.quote(p) for p in parts)


# -- failing cases, one list item each --------------------------------------------------


def _golden_case(item: dict[str, Any], _labels: list[str]) -> str:
    if item.get("kind") == "error":
        detail = md(item.get("error"))
    else:
        detail = (f"expected {md(item.get('expected'))}, selected "
                  f"{md(answer(item.get('selected'), item.get('confidence')))}")
    return f"{md(item.get('case_id'))}: {detail} · input: {md(preview(item.get('input')))}"


def _property_case(item: dict[str, Any], labels: list[str]) -> str:
    line = (f"{md(item.get('id', item.get('case_id')))}: {md('; '.join(problems(item)))}"
            f" · sent: {sent(item, labels)}")
    if item.get("reduced"):
        line += f" · minimal: {sent(item['reduced'], labels)}"
    return line


def _persona_case(item: dict[str, Any], _labels: list[str]) -> str:
    return (f"pair {md(item.get('pair_id'))} ({md(item.get('group_a'))} vs "
            f"{md(item.get('group_b'))}): {md(item.get('selected_a'))} vs "
            f"{md(item.get('selected_b'))}, TV {number(item.get('tv'))}")


def _change(item: dict[str, Any], _labels: list[str]) -> str:
    kind = str(item.get("kind", "")).replace("_", " ")
    before = answer(item.get("baseline_selected"), item.get("baseline_confidence"))
    after = answer(item.get("candidate_selected"), item.get("candidate_confidence"))
    expected = item.get("expected")
    error = f" ({md(item['error'])})" if item.get("error") else ""
    return (f"{md(item.get('case_id'))}: {md(kind)} {md(before)} → {md(after)}{error}"
            f"{'' if expected is None else f' (expected {md(expected)})'}"
            f" · input: {md(preview(item.get('input')))}")


def _segment(item: dict[str, Any], _labels: list[str]) -> str:
    failing = [c["message"] for c in item.get("checks") or [] if c.get("status") != "pass"]
    total = ((item.get("metrics") or {}).get("counts") or {}).get("total")
    return (f"{md(item.get('key'))}={md(item.get('value'))} ({counted(total or 0, 'record')})"
            f": {md('; '.join(failing) or str(item.get('status')))}")


CASE_LINES: dict[str, Callable[[dict[str, Any], list[str]], str]] = {
    "golden": _golden_case, "property": _property_case, "persona": _persona_case,
    "change": _change, "segment": _segment,
}


def _where_all(report: Report, gate: FailingGate, json_location: str) -> str:
    """Where every case of the gate is stored."""
    stage = COMPLETE_IN.get(gate.source)
    artifacts = report.run.artifacts if report.run else None
    if stage and artifacts and stage in artifacts:
        found = artifacts[stage]
        return f"the run's {stage} stage, {place(found.uri or found.path or '')}"
    return f"`{md(gate.source)}` of {place(json_location)}"


def gate_block(report: Report, gate: FailingGate, json_location: str) -> list[str]:
    """One failing gate: its status and verdict, then every failing case (up to
    `MAX_CASES_PER_GATE`) and where they all are."""
    check = gate.check
    lines = [f"### {status_label(check.status)} {md(brief(check.judged()))}", ""]
    if gate.aggregate:
        return [*lines, "Judged on the whole run: no single case fails it.", ""]
    if not gate.total:
        return [*lines, f"No failing case is stored with the report ({md(check.message)}).",
                ""]
    shown = gate.cases[:MAX_CASES_PER_GATE]
    lines.append(f"{counted(gate.total, 'failing case')}, from `{md(gate.source)}` of "
                 f"{place(json_location)}:")
    lines.append("")
    labels = report.contract.labels if report.contract else []
    lines.extend(f"- {CASE_LINES[gate.kind](item, labels)}" for item in shown)
    if gate.total > len(shown):
        lines.append(f"- … and {gate.total - len(shown)} more: every one is in "
                     f"{_where_all(report, gate, json_location)}")
    return [*lines, ""]


def gates_table(report: Report) -> list[str]:
    """Every gate in four short columns (the checks table artifact has them in full)."""
    checks = failing_first(report.checks)
    if not checks:
        return ["## Gates", "", "No gate is configured for this run.", ""]
    holding = sum(c.status == "pass" for c in checks)
    rows = ((status_label(c.status), md(c.gate) + level_tag(c.level), number(c.value),
             f"{COMPARISONS.get(c.comparison, md(c.comparison))} {number(c.threshold)}")
            for c in checks)
    return [f"## Gates: {holding} of {len(checks)} hold", "",
            *table(("status", "gate", "value", "must be"), rows)]


def report_artifact(report: dict[str, Any], locations: Mapping[str, str]) -> str:
    """The Markdown report artifact (see the module docstring); `locations` maps the
    stored files (`report.json`, `report.html`; the first is the JSON) to where they are."""
    head = view_model(report)
    title, sections = titled_sections(head)
    json_location = next(iter(locations.values()), "the report JSON")
    failing = failing_gates(report)
    lines = verdict_lines(head, title)
    if failing:
        lines.extend([f"## Failing gates: {len(failing)} of {len(head.checks)}", ""])
        for gate in failing:
            lines.extend(gate_block(head, gate, json_location))
    lines.extend(stored_block(locations, report_command(report, json_location)))
    lines.extend(gates_table(head))
    for name, section in sections:
        if name not in REPLACED:
            lines.extend(section)
    # one pass over the page, as the Markdown view (control and bidi characters as escapes)
    return escape("\n".join(lines).rstrip(), keep_newlines=True) + "\n"
