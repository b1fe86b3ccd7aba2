"""The `report` stage under Prefect: the run's artifacts in the Prefect UI.

Every flow run publishes the Markdown report (ending with where the report and the HTML
view written next to it are stored) and a table of checks; stores a browser can reach also
get link artifacts. Artifacts are keyed by decision, mode and backend, so nightly runs of
the same contract become versions of one artifact.
"""

from __future__ import annotations

import re
import time
from pathlib import PurePosixPath
from uuid import UUID

from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from decflow.redaction import redact
from decflow.store.runs import read_run_json
from decflow.store.store import Store
from decflow.tasks.common import stage_task


def artifact_key(*parts: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    joined = "-".join(parts).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", joined)).strip("-")


def publish_report(store: Store, relative: str, key: str) -> str:
    """Publish the artifacts of the report stored at `relative` (`…/<name>.json`), with its
    HTML view written next to it; returns where the stored JSON is (path or URL)."""
    from decflow.views.artifacts import check_rows, linkable, report_artifact
    from decflow.views.stored import write_stored_html

    # verified against its recorded sha256; redacted, as it may predate a secret's use
    stored = PurePosixPath(relative)
    report = redact(read_run_json(store, stored.parent.name, stored.name))
    name = PurePosixPath(relative).stem
    files = {f"{name}.json": relative, f"{name}.html": write_stored_html(store, relative, report)}
    locations = {file: store.uri(path) for file, path in files.items()}
    status = str(report["status"]).upper()
    create_markdown_artifact(report_artifact(report, locations), key=f"{key}-{name}",
                             description=f"decflow {name} ({status})")
    create_table_artifact(check_rows(report), key=f"{key}-{name}-checks",
                          description=f"checks ({status})")
    for file, location in locations.items():
        if linkable(location):
            kind = PurePosixPath(file).suffix[1:]
            create_link_artifact(location, link_text=file, key=f"{key}-{name}-{kind}",
                                 description=f"the stored {file}")
    return locations[f"{name}.json"]


@stage_task("report")
def report_task(store_url: str, relative: str, key: str) -> str:
    """Publish the artifacts of a stored report; returns where it is stored."""
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
