"""The typed model a view reads for each report kind: a contract run's `RunView`, a check's
`CheckView`, a diff's `DiffView` (each what the views read, which DecGuard 0.1's reports
satisfy too), a monitor's `MonitorReport`; other kinds (probe, replay) their shared
`Report`. The views dispatch on the model's type (`is_run`, `is_check`, `is_diff`,
`is_monitor`), so each reads its sections as attributes: a misspelled key is a type error,
not a silent `None`.

A kind's model is imported when a report of that kind is read, not before: showing a
contract run never loads the check, diff and monitor models (nor asks about them: a model
whose module was never imported has no instances).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, TypeGuard

from decflow.report.model import Report
from decflow.report.sections import report_kind

if TYPE_CHECKING:
    from decflow.report.check_report import CheckView
    from decflow.report.diff_report import DiffView
    from decflow.report.monitor_report import MonitorReport
    from decflow.report.run_report import RunView

# kind -> (the module of its model, the model's name, what a report of it is called)
VIEW_MODELS: dict[str, tuple[str, str, str]] = {
    "run": ("decflow.report.run_report", "RunView", "run report"),
    "check": ("decflow.report.check_report", "CheckView", "check report"),
    "diff": ("decflow.report.diff_report", "DiffView", "diff report"),
    "monitor": ("decflow.report.monitor_report", "MonitorReport", "monitor report"),
}


def _is(report: Report, kind: str) -> bool:
    module, name, _ = VIEW_MODELS[kind]
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(report, getattr(loaded, name))


def is_run(report: Report) -> TypeGuard[RunView]:
    return _is(report, "run")


def is_check(report: Report) -> TypeGuard[CheckView]:
    return _is(report, "check")


def is_diff(report: Report) -> TypeGuard[DiffView]:
    return _is(report, "diff")


def is_monitor(report: Report) -> TypeGuard[MonitorReport]:
    return _is(report, "monitor")


def kind_of(report: Report) -> str:
    """The kind a typed report is of (DecGuard's diff and check reports carry no `kind`)."""
    for kind in VIEW_MODELS:
        if _is(report, kind):
            return kind
    return report.kind or "run"


def view_model(report: dict[str, Any] | Report) -> Report:
    """`report` as the typed model of its kind (a model is returned as it is). The per-case
    lists are not validated again here: a report reaches a view built by its stage or
    verified when it was loaded (`report.loading`)."""
    if isinstance(report, Report):
        return report
    found = VIEW_MODELS.get(report_kind(report))
    if found is None:
        return Report.read(report, "the report", "decflow report", per_case=False)
    module, name, what = found
    model: type[Report] = getattr(importlib.import_module(module), name)
    return model.read(report, "the report", what, per_case=False)
