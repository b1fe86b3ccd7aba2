"""A monitor run's report (`decflow monitor`): the monitor (source, window, baseline), what
this run read, the time series of windows (each with its current report's run, verdict and
gated values, and the runs it superseded), the harmful-shift alarm, and the checks its
verdict follows from: the alarm and the windows of the last run that checked any (with the
newest window). Its headline leads with `OK`, `WARN` or `ALARM since <window>`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from decflow.gates.checks import Verdict
from decflow.report.check_report import CheckContract
from decflow.report.model import CheckRow, Count, ExitCode, Open, Report

MONITOR_KIND: Literal["monitor"] = "monitor"


class MonitorBlock(Open):
    id: str
    source: str
    labels: str | None = None
    window: str
    without_timestamp: str
    baseline: dict[str, Any] | None = None


class MonitorWindow(Open):
    """One window of the time series, as its current report judged it."""

    name: str
    start: str
    n_records: Count
    n_labelled: Count
    status: Verdict
    headline: str
    run_id: str
    reason: str
    superseded: list[str] = Field(default_factory=list)
    gates: dict[str, dict[str, Any]] = Field(default_factory=dict)
    risk: dict[str, Any] = Field(default_factory=dict)  # its labelled records' risk


class MonitorReport(Report):
    kind: Literal["monitor"]
    status: Verdict
    exit_code: ExitCode
    headline: str
    contract: CheckContract
    monitor: MonitorBlock
    this_run: dict[str, Any]
    checked: list[str]
    windows: list[MonitorWindow]
    harmful_shift: dict[str, Any] | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)
    checks: list[CheckRow]


def is_monitor_report(report: dict[str, Any]) -> bool:
    return report.get("kind") == MONITOR_KIND
