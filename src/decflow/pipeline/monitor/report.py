"""The monitor report (`report.monitor_report.MonitorReport`) built from the monitor's
state after a run: the windows as a time series, what the run read, and the verdict.

The verdict follows from the windows of the last run that checked any and the newest
window (a window checked long ago no longer decides today's verdict; its report stays in
the history) and from the harmful-shift alarm: ALARM (`fail`, exit 1) when a window
fails or the alarm is raised, WARN when a window warns or is not established or the
configured alarm cannot decide (no baseline, no labelled baseline record, a threshold ≥ 1),
else OK. A window without gates is no check: nothing of it holds.
"""

from __future__ import annotations

from typing import Any

import decflow
from decflow.data.records.windows import window_start
from decflow.gates.checks import Check, status_of
from decflow.gates.headline import Qualifier, brief, headline
from decflow.pipeline.monitor.alarm import GATE as SHIFT_GATE
from decflow.pipeline.monitor.alarm import Advanced, shift_check, summary
from decflow.pipeline.monitor.baselines import MonitorBaseline
from decflow.pipeline.monitor.stages import MonitorContext, settings
from decflow.pipeline.monitor.state import MonitorState, Window
from decflow.pipeline.production.summary import contract_block
from decflow.redaction import redact
from decflow.report.model import CheckRow, QualifierRow, RunRef
from decflow.report.monitor_report import (
    MONITOR_KIND,
    MonitorBlock,
    MonitorReport,
    MonitorWindow,
)
from decflow.report.versions import REPORT_VERSION

LABELS = {"pass": "OK", "warn": "WARN", "fail": "ALARM"}
HISTORY = 20  # monitor runs shown in a report
WINDOW_GATE = "window"


def _window_check(window: Window) -> Check:
    """A window as one check of the monitor: its status, its headline as the message."""
    current = window.current
    failing = sum(g["status"] != "pass" for g in window.gates.values())
    # a WARN window (gates not established, or warnings) is not shown to hold: not established
    status = {"pass": "pass", "warn": "not_established", "fail": "fail"}[current.status]
    return Check(f"{WINDOW_GATE}[{window.name}]", "requirement", WINDOW_GATE, "<=", 0.0,
                 float(failing), status, current.headline)  # type: ignore[arg-type]


def _item(check: Check) -> str:
    """A check of the monitor in its headline: a window as `<window>: <its first open
    gate> (+N more)`,
    the alarm as its message (`error rate 0.16 [0.13, 0.19] > baseline 0.105 + 0.02`)."""
    if check.metric == WINDOW_GATE:
        name = check.gate[len(WINDOW_GATE) + 1:-1]
        first = check.message.partition(": ")[2].split("; ")[0]
        more = int(check.value or 0) - 1
        return f"{name}: {first}" + (f" (+{more} more)" if more > 0 else "")
    if check.gate == SHIFT_GATE and check.status != "pass":
        return check.message
    return brief(check)


def _focus(state: MonitorState) -> list[Window]:
    names = set(state.last_checked)
    if state.windows:
        names.add(max(state.windows))
    return [state.windows[n] for n in sorted(names) if n in state.windows]


def _series(state: MonitorState) -> list[dict[str, Any]]:
    out = []
    for name in sorted(state.windows):
        window = state.windows[name]
        current = window.current
        out.append({
            "name": name, "start": window_start(name).isoformat(),
            "n_records": window.n_records, "n_labelled": window.n_labelled,
            "status": current.status, "headline": current.headline,
            "run_id": current.run_id, "reason": current.reason,
            "superseded": [r.run_id for r in window.reports[:-1]], "gates": window.gates,
            "risk": window.risk,
        })
    return out


def _qualifiers(state: MonitorState, baseline: MonitorBaseline | None,
                advanced: Advanced) -> list[Qualifier]:
    found = []
    if not state.windows:
        found.append(Qualifier("no windows yet", "no record was read"))
    if baseline is None:  # the harmful-shift alarm says so as its own check
        found.append(Qualifier("no baseline", "drift needs --baseline"))
    if advanced.restarted:
        found.append(Qualifier("detector restarted", advanced.restarted))
    return found


def _label(status: str, advanced: Advanced) -> str:
    """The headline's first word: OK, WARN or ALARM; `ALARM since <window>` once the
    harmful-shift alarm is raised."""
    alarm = None if advanced.detector is None else advanced.detector.alarm
    return f"ALARM since {alarm.since}" if alarm is not None else LABELS[status]


def build_report(context: MonitorContext, state: MonitorState, read: dict[str, Any],
                 checked: list[str], baseline: MonitorBaseline | None,
                 advanced: Advanced) -> dict[str, Any]:
    """The monitor report of this run, as written to `runs/<run_id>/report.json`."""
    spec, loaded = context.spec, context.loaded
    shift = shift_check(advanced)
    # a window with no gate has nothing that holds: it is not counted as a check
    checks = [*([] if shift is None else [shift]),
              *(_window_check(w) for w in _focus(state) if w.gates)]
    status, exit_code = status_of(checks)
    monitor = settings(context)
    qualifiers = _qualifiers(state, baseline, advanced)
    built = MonitorReport(
        report_version=REPORT_VERSION, decflow_version=decflow.__version__, kind=MONITOR_KIND,
        created_at=spec.created_at, mode=MONITOR_KIND, status=status, exit_code=exit_code,
        headline=headline(status, checks, item=_item, label=_label(status, advanced),
                          qualifiers=qualifiers),
        qualifiers=[QualifierRow.model_validate(q.to_dict()) for q in qualifiers],
        contract=contract_block(loaded.contract, spec.contract_path, loaded.hash),
        monitor=MonitorBlock.model_validate({
            "id": state.monitor_id, "source": state.source, "labels": state.labels_source,
            "window": monitor.window, "without_timestamp": monitor.without_timestamp,
            "baseline": None if baseline is None else {
                **{k: v for k, v in baseline.baseline.block.items() if k != "metrics"},
                "changed": baseline.changed}}),
        this_run=read, checked=checked, harmful_shift=summary(advanced),
        windows=[MonitorWindow.model_validate(w) for w in _series(state)],
        history=[{"run_id": r.run_id, "at": r.at, "status": r.status,
                  "headline": r.headline, "bytes_read": r.read.get("bytes_read")}
                 for r in state.runs[-HISTORY:]],
        checks=[CheckRow.model_validate(c.to_dict()) for c in checks],
        run=RunRef(id=spec.run_id, store=context.store.location),
    )
    report: dict[str, Any] = redact(built.to_dict())
    return report
