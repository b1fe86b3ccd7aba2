"""The `report` stage under Prefect: the run's artifacts in the Prefect UI.

Every flow run publishes a Markdown summary, a table of checks and links to the stored
report (JSON, and the HTML view written next to it). Artifacts are keyed by decision,
mode and backend, so nightly runs of the same contract become versions of one artifact.
"""

from __future__ import annotations

import re
import time
from pathlib import Path, PurePosixPath
from typing import Any
from uuid import UUID

from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from decflow.store.store import Store
from decflow.tasks.common import stage_task

CHECK_COLUMNS = ("gate", "level", "metric", "comparison", "threshold", "value", "status",
                 "message")


def artifact_key(*parts: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    joined = "-".join(parts).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", joined)).strip("-")


def store_link(store: Store, relative: str) -> str:
    uri = store.uri(relative)
    return Path(uri).as_uri() if store.is_local else uri


def check_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{column: check.get(column) for column in CHECK_COLUMNS}
            for check in report.get("checks") or []]


def publish_report(store: Store, relative: str, key: str) -> str:
    """Publish the artifacts of the report stored at `relative` (`…/<name>.json`), with its
    HTML view written next to it; returns the link to the stored JSON."""
    from decflow.views.html import render_html
    from decflow.views.markdown import render_markdown

    report = store.read_json(relative)
    name = PurePosixPath(relative).stem
    base = str(PurePosixPath(relative).with_suffix(""))
    store.write_bytes(f"{base}.html", render_html(report).encode())
    status = str(report["status"]).upper()
    create_markdown_artifact(render_markdown(report), key=f"{key}-{name}",
                             description=f"decflow {name} ({status})")
    create_table_artifact(check_rows(report), key=f"{key}-{name}-checks",
                          description=f"checks ({status})")
    links = {}
    for kind in ("json", "html"):
        links[kind] = store_link(store, f"{base}.{kind}")
        create_link_artifact(links[kind], link_text=f"{name}.{kind}",
                             key=f"{key}-{name}-{kind}",
                             description=f"the stored {kind.upper()} {name}")
    return links["json"]


@stage_task("report")
def report_task(store_url: str, relative: str, key: str) -> str:
    """Publish the artifacts of a stored report; returns its link."""
    return publish_report(Store(store_url), relative, key)


class CallProgress:
    """A progress artifact for the call stage, moved forward as shards finish: at most
    every `EVERY_S` seconds and at the end (an update is a server round trip, ≈0.1 s on
    SQLite: not worth paying for every short shard)."""

    EVERY_S = 5.0

    def __init__(self, shards: int, description: str) -> None:
        self.shards = shards
        self.done = 0
        self.artifact_id: UUID | None = None
        self.updated = time.monotonic()
        if shards:
            self.artifact_id = create_progress_artifact(0.0, description=description)

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.artifact_id is None or (
            self.done < self.shards and now - self.updated < self.EVERY_S
        ):
            return
        self.updated = now
        update_progress_artifact(self.artifact_id, 100.0 * self.done / self.shards)
