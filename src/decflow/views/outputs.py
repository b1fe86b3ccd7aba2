"""Every view of a report: text for the terminal, and the HTML/Markdown/JUnit files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decflow.errors import DecflowError
from decflow.redaction import redact_text

# Report kinds the file views do not describe (a probe has relations, not gates).
NO_FILE_VIEWS = frozenset({"probe"})


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
    return render(report, sections)


def _write(path: str, text: str, what: str) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redact_text(text), encoding="utf-8")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None


def write_views(
    report: dict[str, Any],
    *,
    html: str | None = None,
    junit: str | None = None,
    markdown: str | None = None,
) -> None:
    if report.get("kind") in NO_FILE_VIEWS and (html or junit or markdown):
        raise DecflowError(
            f"--html/--markdown/--junit are not available for {report['kind']} reports "
            "(they show gates of contract runs, checks and diffs); use the text view or -f json"
        )
    if html:
        from decflow.views.html import render_html

        _write(html, render_html(report), "HTML report")
    if markdown:
        from decflow.views.markdown import render_markdown

        _write(markdown, render_markdown(report), "Markdown report")
    if junit:
        from decflow.views.junit import render_junit

        _write(junit, render_junit(report), "JUnit report")
