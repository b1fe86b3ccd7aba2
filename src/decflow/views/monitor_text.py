"""The terminal view of a monitor run: the headline, the monitor, what this run read, the
windows as a time series (newest last; each with its verdict, why it was last judged and
the gates that did not pass), and the harmful-shift alarm."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import bounds, number
from decflow.report.monitor_report import MonitorReport, MonitorWindow
from decflow.untrusted import escape
from decflow.version import __version__
from decflow.views.identity import baseline_text

SHOWN_WINDOWS = 30  # the newest; the report holds them all
WORDS = {"pass": "OK", "warn": "WARN", "fail": "ALARM"}


def size(n_bytes: int) -> str:
    """Bytes for a person: `0 B`, `812 B`, `34.2 kB`, `1.5 MB`."""
    value = float(n_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n_bytes} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n_bytes} B"


def read_line(read: dict[str, Any]) -> str:
    """What the run read, in one line."""
    labels = [*read.get("labels_new", []), *read.get("labels_rewritten", [])]
    if not read.get("new") and not read.get("rewritten") and not labels:
        return (f"nothing new in {read.get('partitions_listed', 0)} partitions: no record "
                "read (0 B)")
    parts = [f"{len(read['new'])} new partition(s)"]
    if read.get("rewritten"):
        parts.append(f"{len(read['rewritten'])} rewritten (read again)")
    if read.get("gone"):
        parts.append(f"{len(read['gone'])} gone")
    parts.append(f"{read['records_read']} records")
    if labels:
        again = (f" ({len(read['labels_rewritten'])} rewritten: read again, earlier labels "
                 "kept)" if read.get("labels_rewritten") else "")
        parts.append(f"{len(labels)} labels partition(s){again}: "
                     f"{read['labels_joined']} joined, {read['labels_pending']} pending")
    return " · ".join(parts) + f" · {size(int(read['bytes_read']))} read"


def open_gates(window: MonitorWindow) -> str:
    """The gates of a window that did not pass, as its headline names them."""
    return "" if window.status == "pass" else window.headline.partition(": ")[2]


def _window_lines(report: MonitorReport) -> list[str]:
    windows = report.windows[-SHOWN_WINDOWS:]
    if not windows:
        return ["  Windows       none yet"]
    checked = set(report.checked)
    lines = ["  Windows       (newest last; * checked by this run)"]
    for window in windows:
        mark = "*" if window.name in checked else " "
        shown = open_gates(window)
        superseded = (f", supersedes {len(window.superseded)}" if window.superseded else "")
        lines.append(f"   {mark}{WORDS[window.status]:<6}{window.name:<18}"
                     f"{window.n_records:>8} records {window.n_labelled:>7} labelled  "
                     f"({window.reason}{superseded})"
                     + (f"  {shown}" if shown else ""))
    hidden = len(report.windows) - len(windows)
    if hidden > 0:
        lines.append(f"    … and {hidden} older windows (decflow runs, or the JSON report)")
    return lines


def shift_line(report: MonitorReport) -> str:
    """The harmful-shift alarm in one line."""
    shift = report.harmful_shift
    if shift is None:
        return "off"
    if shift.get("cannot_alarm"):
        return f"not established: {shift['cannot_alarm']}"
    words = "error rate" if shift["metric"] == "error_rate" else "Brier"
    threshold = (f"baseline {number(shift['baseline']['risk'])} (upper "
                 f"{number(shift['baseline']['upper'])}) + {number(shift['tolerance'])}")
    alarm = shift.get("alarm")
    if alarm:
        return (f"ALARM since {alarm['since']} (raised by window {alarm['window']}): {words} "
                f"{number(alarm['risk'])} {bounds(alarm['low'], alarm['high'])} over "
                f"{alarm['n']} labelled records > {threshold}")
    return (f"no alarm: {shift['labelled']} labelled records against {threshold}; "
            f"{shift['guarantee']}")


def _alarm_lines(report: MonitorReport) -> list[str]:
    return ["", f"  Harmful shift {shift_line(report)}"]


def render_monitor(head: MonitorReport) -> str:
    """The whole text view, ending with a newline."""
    monitor = head.monitor
    baseline = monitor.baseline
    lines = [
        head.headline,
        f"decflow {__version__} · monitor · {head.contract.name} ({head.contract.type}) · "
        f"{WORDS[head.status]}",
        "",
        f"  monitor       {monitor.id} · windows of {monitor.window} · {monitor.source}",
        f"  labels        {monitor.labels or 'none given'}",
        "  baseline      " + ("none (drift is not judged)" if baseline is None else
                              baseline_text(baseline)),
        f"  this run      {read_line(head.this_run)}",
        "",
        *_window_lines(head),
        *_alarm_lines(head),
    ]
    if head.this_run.get("labels_repeated"):
        lines.append(f"  labels        {head.this_run['labels_repeated']} repeated labels ignored "
                     "(the first label of a decision counts)")
    return "\n".join(escape(line) for line in lines) + "\n"
