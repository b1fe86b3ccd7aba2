"""The HTML view of a monitor run: the headline banner, the monitor and what this run
read, one chart per gated metric window by window (value, band, limit; the harmful-shift
alarm shaded from the window it names), and the windows' table with their runs."""

from __future__ import annotations

from typing import Any

from decflow.report.model import Report
from decflow.report.monitor_report import MonitorReport
from decflow.views.html import banner, e, kv_table, pill, plots, section, table
from decflow.views.monitor_text import WORDS, read_line
from decflow.views.svg import SeriesPoint, window_series


def _charts(report: MonitorReport) -> str:
    gates = sorted({gate for w in report.windows for gate in w.gates})
    alarm = (report.harmful_shift or {}).get("alarm") or {}
    charts = []
    for gate in gates:
        points = [SeriesPoint(w.name, g.get("value"), g.get("low"), g.get("high"),
                              g.get("status", "pass"))
                  for w in report.windows for g in [w.gates.get(gate, {})]]
        limits = [w.gates[gate]["limit"] for w in report.windows if gate in w.gates]
        charts.append(window_series(points, gate, limit=limits[-1] if limits else None,
                                    alarm_from=alarm.get("since"),
                                    alarm_label=f"ALARM since {alarm.get('since')}"))
    return plots(*charts)


def _windows_table(report: MonitorReport) -> str:
    checked = set(report.checked)
    rows = [(e(w.name) + (" *" if w.name in checked else ""), pill(w.status),
             e(w.n_records), e(w.n_labelled), e(w.reason),
             e(", ".join(w.superseded) or "–"), e(w.run_id),
             e(w.headline if w.status != "pass" else ""))
            for w in reversed(report.windows)]
    return table(("window", "status", "records", "labelled", "last judged for",
                  "superseded runs", "run", "open gates"), rows,
                 (w.status for w in reversed(report.windows)))


def monitor_body(report: dict[str, Any], head: Report) -> tuple[str, list[str]]:
    typed = MonitorReport.read(report, "the monitor report")
    monitor = typed.monitor
    facts = {"monitor": monitor.id, "source": monitor.source, "labels": monitor.labels,
             "window": monitor.window, "baseline": (monitor.baseline or {}).get("path"),
             "this run": read_line(typed.this_run), "verdict": WORDS[typed.status]}
    parts = [banner(head, "decflow monitor"), section("Monitor", kv_table(facts))]
    if typed.windows:
        parts.append(section("Gated metrics, window by window", _charts(typed)))
        parts.append(section("Windows (newest first; * checked by this run)",
                             _windows_table(typed)))
    return "decflow monitor", parts
