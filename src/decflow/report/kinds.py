"""The typed model a view reads for each report kind: a contract run's `RunView`, a check's
`CheckView`, a diff's `DiffView` (each what the views read, which DecGuard 0.1's reports
satisfy too), a monitor's `MonitorReport`; other kinds (probe, replay) their shared
`Report`. The views dispatch on the model's type, so each reads its sections as
attributes: a misspelled key is a type error, not a silent `None`.
"""

from __future__ import annotations

from typing import Any

from decflow.report.check_report import CheckView
from decflow.report.diff_report import DiffView
from decflow.report.model import Report
from decflow.report.monitor_report import MonitorReport
from decflow.report.run_report import RunView
from decflow.report.sections import report_kind

VIEW_MODELS: dict[str, tuple[type[Report], str]] = {
    "run": (RunView, "run report"),
    "check": (CheckView, "check report"),
    "diff": (DiffView, "diff report"),
    "monitor": (MonitorReport, "monitor report"),
}


def kind_of(report: Report) -> str:
    """The kind a typed report is of (DecGuard's diff and check reports carry no `kind`)."""
    for kind, (model, _) in VIEW_MODELS.items():
        if isinstance(report, model):
            return kind
    return report.kind or "run"


def view_model(report: dict[str, Any] | Report) -> Report:
    """`report` as the typed model of its kind (a model is returned as it is). The per-case
    lists are not validated again here: a report reaches a view built by its stage or
    verified when it was loaded (`report.loading`)."""
    if isinstance(report, Report):
        return report
    model, what = VIEW_MODELS.get(report_kind(report), (Report, "decflow report"))
    return model.read(report, "the report", what, per_case=False)
