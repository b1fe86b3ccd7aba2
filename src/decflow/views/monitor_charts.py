"""The charts of a monitor's HTML view: one per gated metric, window by window (value,
band, limit; the harmful-shift alarm shaded from the window it names)."""

from __future__ import annotations

from decflow.report.monitor_report import MonitorReport
from decflow.views.svg import SeriesPoint, window_series


def risk_chart(report: MonitorReport) -> str:
    """The labelled records' risk window by window against the alarm's threshold (the
    baseline's upper bound + tolerance), the alarm shaded from the window it names."""
    shift = report.harmful_shift
    if shift is None or "threshold" not in shift:  # off, or no detector to draw
        return ""
    alarm = shift.get("alarm") or {}
    since = alarm.get("since")
    points = [SeriesPoint(w.name, w.risk.get("value"), w.risk.get("low"), w.risk.get("high"),
                          "fail" if since is not None and w.name >= since else "pass")
              for w in report.windows]
    words = "error rate" if shift["metric"] == "error_rate" else "Brier (top label)"
    return window_series(points, f"harmful shift: {words} of labelled records",
                         limit=shift["threshold"], alarm_from=since,
                         alarm_label=f"ALARM since {since}")


def gate_charts(report: MonitorReport) -> list[str]:
    """The risk chart, then one inline SVG per gate any window was judged on, in gate
    order."""
    gates = sorted({gate for w in report.windows for gate in w.gates})
    alarm = (report.harmful_shift or {}).get("alarm") or {}
    charts = [risk_chart(report)]
    for gate in gates:
        points = [SeriesPoint(w.name, g.get("value"), g.get("low"), g.get("high"),
                              g.get("status", "pass"))
                  for w in report.windows for g in [w.gates.get(gate, {})]]
        limits = [w.gates[gate]["limit"] for w in report.windows if gate in w.gates]
        charts.append(window_series(points, gate, limit=limits[-1] if limits else None,
                                    alarm_from=alarm.get("since"),
                                    alarm_label=f"ALARM since {alarm.get('since')}"))
    return charts
