"""The HTML view stored next to a stored report (`runs/<id>/report.json` → `report.html`).

One function for every runner: the CLI commands call it after a direct run, the Prefect
`report` task after a flow's summary, so a run stores the same files however it ran.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from decflow.store.runs import read_run_json, report_path, write_run_file
from decflow.store.store import Store


def html_path(relative: str) -> str:
    """`…/<name>.json` → `…/<name>.html` (store-relative)."""
    return str(PurePosixPath(relative).with_suffix(".html"))


def write_stored_html(store: Store, relative: str, report: dict[str, Any] | None = None) -> str:
    """Write the HTML view of the report stored at `relative` beside it (`report`, when
    given, is that stored report, not read again); returns the HTML's store path."""
    from decflow.report.kinds import view_model
    from decflow.views.html import render_html

    target = PurePosixPath(html_path(relative))
    run_id = target.parent.name
    shown = read_run_json(store, run_id, PurePosixPath(relative).name) if report is None else report
    return write_run_file(store, run_id, target.name, render_html(view_model(shown)).encode())


def write_run_html(store: Store, report: dict[str, Any]) -> str:
    """`write_stored_html` for a report just stored as run `report["run"]["id"]`."""
    return write_stored_html(store, report_path(report["run"]["id"]), report)


def write_window_html(store: Store, report: dict[str, Any]) -> list[str]:
    """The HTML view of each window run a monitor run checked (stored as runs of their
    own); returns their store paths."""
    by_name = {w["name"]: w["run_id"] for w in report["windows"]}
    return [write_stored_html(store, report_path(by_name[name])) for name in report["checked"]]
