"""The Markdown view of a monitor run (the Prefect artifact): the headline, what this run
read, the windows newest first with their verdicts and open gates, and the checks."""

from __future__ import annotations

from typing import Any

from decflow.report.monitor_report import MonitorReport
from decflow.views.markdown import checks_block, kv_table, md, status_line, table
from decflow.views.monitor_text import WORDS, read_line

SHOWN_WINDOWS = 14


def render_monitor_markdown(report: dict[str, Any]) -> list[str]:
    typed = MonitorReport.read(report, "the monitor report")
    monitor = typed.monitor
    lines = status_line(typed, f"decflow monitor: {md(typed.contract.name)}")
    lines.extend(kv_table({"monitor": monitor.id, "source": monitor.source,
                           "labels": monitor.labels or "none",
                           "window": monitor.window,
                           "baseline": (monitor.baseline or {}).get("path") or "none",
                           "this run": read_line(typed.this_run)}, ("", "")))
    shown = list(reversed(typed.windows))[:SHOWN_WINDOWS]
    if shown:
        checked = set(typed.checked)
        rows = [(md(w.name) + (" (this run)" if w.name in checked else ""), WORDS[w.status],
                 str(w.n_records), str(w.n_labelled), md(w.reason),
                 md(w.headline.partition(": ")[2] if w.status != "pass" else ""))
                for w in shown]
        lines.extend([f"## Windows ({len(shown)} newest of {len(typed.windows)})", "",
                      *table(("window", "verdict", "records", "labelled", "last judged for",
                              "open gates"), rows)])
    lines.extend(checks_block(typed))
    return lines
