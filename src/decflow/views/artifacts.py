"""What the Prefect UI shows of a stored report: the Markdown report followed by where the
report is stored, and the checks as table-artifact rows.

The UI renders table cells as Markdown, so every cell is Markdown-safe text (comparisons
as words, numbers as the check messages print them). A location is a link only when a
browser can open it; a local store's path is named as text (a `file://` link from a web
page opens nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from decflow.gates.headline import failing_first
from decflow.report.model import Report
from decflow.views.markdown import CHECK_HEADERS, check_cells, md, render_markdown, table

# Locations worth a link: web URLs, and object-store URLs (S3 consoles and tools open them);
# never a path on the machine that ran the flow.
LINKABLE_SCHEMES = frozenset({"http", "https", "s3"})


def linkable(location: str) -> bool:
    return urlsplit(location).scheme in LINKABLE_SCHEMES


def check_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """The report's checks as rows of the checks table artifact (columns `CHECK_HEADERS`),
    failing checks first."""
    return [check_cells(check) for check in failing_first(Report.view(report).checks)]


def placeholder_rows(message: str) -> list[dict[str, str]]:
    """A checks table saying why there are no checks (it replaces the previous version of
    the artifact, which would otherwise stand as the latest)."""
    return [{**dict.fromkeys(CHECK_HEADERS, "n/a"), "message": md(message)}]


def stored_block(locations: Mapping[str, str]) -> list[str]:
    """Where the report's files are: `{file name: location}`."""
    rows = ((md(name), f"[{md(where)}]({where})" if linkable(where) else md(where))
            for name, where in locations.items())
    return ["## Stored", "", *table(("file", "where"), rows)]


def report_artifact(report: dict[str, Any], locations: Mapping[str, str]) -> str:
    """The Markdown report artifact: the report's Markdown view, then where it is stored."""
    return render_markdown(report) + "\n" + "\n".join(stored_block(locations))
