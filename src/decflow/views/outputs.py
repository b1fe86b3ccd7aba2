"""Every view of a report: text for the terminal, and the files of the registered formats
(`views/formats.py`: HTML, Markdown, JUnit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decflow.errors import DecflowError
from decflow.redaction import redact_text
from decflow.report.sections import report_kind
from decflow.views.formats import VIEW_FORMATS


def render_text(report: dict[str, Any]) -> str:
    """The terminal view of any stored report kind (run, diff, check)."""
    kind = report.get("kind", "run")
    if kind == "diff":
        from decflow.views.diff_text import render_diff

        return render_diff(report)
    if kind == "probe":
        from decflow.views.probe_text import render_probe

        return render_probe(report)
    if kind == "check":
        from decflow.views.production_text import render_check

        return render_check(report)
    if kind == "monitor":
        from decflow.views.monitor_text import render_monitor

        return render_monitor(report)
    from decflow.views.text import Section, render

    sections: list[Section] = []
    if report.get("diagnostics"):
        from decflow.views.diagnostics_text import diagnostics_block

        sections.append(diagnostics_block)
    if report.get("properties"):
        from decflow.views.properties_text import properties_block

        sections.append(properties_block)
    if report.get("sequential"):
        from decflow.views.sequential_text import sequential_block

        sections.append(sequential_block)
    if report.get("call_cache"):
        from decflow.views.cache_text import cache_block

        sections.append(cache_block)
    return render(report, sections)


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
    kind = report_kind(report)
    refused = [found for found, _ in asked if kind not in found.kinds]
    if refused:
        options = "/".join(found.option for found in refused)
        raise DecflowError(
            f"{options}: not available for {kind} reports (they show gates of contract runs, "
            "checks and diffs); use the text view or -f json"
        )
    for found, path in asked:
        _write(str(path), found.render(report), found.what)
