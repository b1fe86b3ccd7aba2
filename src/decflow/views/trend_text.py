"""The trend of a decision (`decflow runs trend DECISION`): one block per gated metric, one
line per run (oldest first) with its value, interval and status; the accepted baseline is
marked `*`. `trend_cells` is what the HTML trend section shows too."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import number
from decflow.report.sections import status_label
from decflow.untrusted import escape


def trend_cell(cell: dict[str, Any] | None) -> str:
    """`0.82 [0.79, 0.85] PASS`, or `-` when the run was not judged by the gate."""
    if cell is None:
        return "-"
    interval = "" if cell["low"] is None or cell["high"] is None else (
        f" [{number(cell['low'])}, {number(cell['high'])}]")
    return f"{number(cell['value'])}{interval} {status_label(cell['status'])}"


def run_label(run: dict[str, Any]) -> str:
    mark = "*" if run["accepted"] else " "
    return f"{mark} {run['run_id']}  {run['backend']}  {run['status'].upper()}"


def trend_cells(trend: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per gate: (gate, [(run label, cell) for every run])."""
    return [(gate, [(run_label(run), trend_cell(run["gates"].get(gate)))
                    for run in trend["runs"]]) for gate in trend["gates"]]


def render_trend(trend: dict[str, Any]) -> str:
    backend = trend["backend"] or "every backend"
    runs = trend["runs"]
    lines = [f"trend of {trend['decision']} ({backend}): {len(runs)} runs, oldest first; "
             "* = accepted baseline; [low, high] = 95% per side"]
    if not runs:
        lines.append("  no finished runs of this decision in the store")
    for gate, cells in trend_cells(trend):
        lines += ["", f"  {gate}"]
        width = max(len(label) for label, _ in cells)
        lines += [f"    {label:<{width}}  {cell}" for label, cell in cells]
    return "\n".join(escape(line) for line in lines) + "\n"
