"""Every view of a report: text for the terminal, and the files of the registered formats
(`views/formats.py`: HTML, Markdown, JUnit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decflow.errors import DecflowError
from decflow.redaction import redact_text
from decflow.report.kinds import is_check, is_diff, is_monitor, is_run, view_model
from decflow.report.model import Report
from decflow.report.sections import report_kind
from decflow.views.formats import VIEW_FORMATS


def render_text(report: dict[str, Any] | Report) -> str:
    """The terminal view of any stored report kind (run, diff, check, monitor, probe),
    dispatched on its typed model (`report.kinds.view_model`)."""
    if not isinstance(report, Report) and report_kind(report) == "probe":
        from decflow.views.probe_text import render_probe

        return render_probe(report)
    typed = view_model(report)
    if is_diff(typed):
        from decflow.views.diff_text import render_diff

        return render_diff(typed)
    if is_check(typed):
        from decflow.views.production_text import render_check

        return render_check(typed)
    if is_monitor(typed):
        from decflow.views.monitor_text import render_monitor

        return render_monitor(typed)
    if not is_run(typed):
        raise DecflowError(f"no text view of {typed.kind} reports")
    from decflow.views.text import Section, render

    sections: list[Section] = []
    if typed.diagnostics is not None and typed.diagnostics.given():
        from decflow.views.diagnostics_text import diagnostics_block

        sections.append(diagnostics_block)
    if typed.properties is not None:
        from decflow.views.properties_text import properties_block

        sections.append(properties_block)
    if typed.sequential is not None:
        from decflow.views.sequential_text import sequential_block

        sections.append(sequential_block)
    if typed.call_cache is not None:
        from decflow.views.cache_text import cache_block

        sections.append(cache_block)
    return render(typed, sections)


def _write(path: str, text: str, what: str) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redact_text(text), encoding="utf-8")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None


def write_views(report: dict[str, Any], **files: str | None) -> None:
    """Write `report` in each registered format given a file (`html="r.html"`, ...)."""
    asked = [(VIEW_FORMATS.get(name), path) for name, path in files.items() if path]
    if not asked:
        return
    kind = report_kind(report)
    refused = [found for found, _ in asked if kind not in found.kinds]
    if refused:
        options = "/".join(found.option for found in refused)
        raise DecflowError(
            f"{options}: not available for {kind} reports (they show gates of contract runs, "
            "checks and diffs); use the text view or -f json"
        )
    typed = view_model(report)
    for found, path in asked:
        _write(str(path), found.render(typed), found.what)
