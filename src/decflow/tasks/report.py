"""The `report` stage under Prefect: the run's artifacts in the Prefect UI.

Every flow run publishes the Markdown report (ending with where the report and the HTML
view written next to it are stored) and a table of checks, both described by the report's
headline; stores a browser can reach also get link artifacts. Keys name where a run comes
from (the deployment, or `cli` for runs started by hand), the decision, the backend and
the kind of result (`artifact_key`), so the runs of one deployment become versions of one
artifact, and a run started by hand never becomes a version of a deployment's.

The call stage's progress artifact counts calls, with the rate and the time left in its
description; the same line goes to the run's log (the terminal of a `--prefect` run).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.artifacts import (
    Artifact,
    LinkArtifact,
    MarkdownArtifact,
    TableArtifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.client.schemas.actions import ArtifactUpdate
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterTags,
)
from prefect.client.schemas.sorting import ArtifactSort
from prefect.runtime import deployment, flow_run

from decflow.redaction import redact
from decflow.report.model import Report
from decflow.report.sections import report_headline
from decflow.store.runs import read_run_json
from decflow.store.store import Store
from decflow.tasks.common import stage_task

CLI_ORIGIN = "cli"
RUN_TAG = "run:"  # a flow run's tag naming its decflow run (`flows.common`)
RUN_LABEL = "decflow.run"  # the flow-run label naming it too (read back by a retry)
# flow-run labels of where its calls are (the crash automation reads them)
PROGRESS_SHARE = "decflow.progress.share"
PROGRESS_LINE = "decflow.progress.line"
BASE_URL = "DECFLOW_REPORT_BASE_URL"


def slug(*parts: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    joined = "-".join(parts).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", joined)).strip("-")


def artifact_key(decision: str, backend: str, kind: str) -> str:
    """`<deployment or cli>-<decision>-<backend>-<kind>`, slugged."""
    origin = deployment.name or CLI_ORIGIN
    return slug(origin, decision, backend, kind)


def report_location(store: Store, relative: str) -> str:
    """Where a browser finds a stored file: `DECFLOW_REPORT_BASE_URL` (a static site or an
    object-store gateway serving the store) with the file's path in the store appended, or
    put where the base says `{path}`; without it, the store's own location of the file (a
    URL for a remote store, a path on this machine for a local one)."""
    base = os.environ.get(BASE_URL, "").strip()
    if not base:
        return store.uri(relative)
    if "{path}" in base:
        return base.replace("{path}", relative)
    return f"{base.rstrip('/')}/{relative}"


def publish_report(store: Store, relative: str, key: str) -> dict[str, Any]:
    """Publish the artifacts of the report stored at `relative` (`…/<name>.json`) under
    `key` (`key-checks`, `key-json`, `key-html`), with its HTML view written next to it:
    the Markdown report, the checks table, a link artifact to the HTML view (a local path
    when nothing maps the store to a URL) and one to the JSON when a browser can open it;
    returns where the stored JSON is (path or URL, `stored`) and the report's caveats (what
    qualifies its verdict, `caveats`: the flow's state message names them)."""
    from decflow.views.artifacts import check_rows, linkable, report_artifact
    from decflow.views.stored import write_stored_html

    # verified against its recorded sha256; redacted, as it may predate a secret's use
    stored = PurePosixPath(relative)
    report = redact(read_run_json(store, stored.parent.name, stored.name))
    name = PurePosixPath(relative).stem
    files = {f"{name}.json": relative, f"{name}.html": write_stored_html(store, relative, report)}
    locations = {file: report_location(store, path) for file, path in files.items()}
    headline = report_headline(report)
    publish(MarkdownArtifact(markdown=report_artifact(report, locations), key=key,
                             description=headline))
    publish(TableArtifact(table=check_rows(report), key=f"{key}-checks", description=headline))
    for file, location in locations.items():
        kind = PurePosixPath(file).suffix[1:]
        if linkable(location):
            publish(LinkArtifact(link=location, link_text=file, key=f"{key}-{kind}",
                                 description=f"the stored {file}: {headline}"))
        elif kind == "html":  # named where it is: nothing maps the store to a URL
            publish(LinkArtifact(link=location, link_text=f"{file}: {location}",
                                 key=f"{key}-{kind}",
                                 description=f"the stored {file} (a path on the machine that "
                                             f"ran the flow; {BASE_URL} maps the store to a "
                                             f"URL): {headline}"))
    return {"stored": locations[f"{name}.json"], "caveats": Report.view(report).caveats()}


def publish(artifact: Artifact) -> None:
    """Create a keyed artifact, or update the version an earlier flow run of the same
    decflow run made (a retried flow run, a `--resume`): one version per decflow run."""
    earlier = _earlier_version(str(artifact.key))
    if earlier is None:
        artifact.create()
        return
    with get_client(sync_client=True) as client:
        client.update_artifact(earlier, ArtifactUpdate(data=artifact.format(),
                                                       description=artifact.description))


def _earlier_version(key: str) -> UUID | None:
    """The latest version of `key` made by a flow run of the current decflow run (the flow
    runs tagged with its `run:` tag), if any."""
    run_id = flow_run.id
    if not run_id:
        return None
    with get_client(sync_client=True) as client:
        tags = [t for t in client.read_flow_run(UUID(run_id)).tags if t.startswith(RUN_TAG)]
        if not tags:
            return None
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=tags[:1])))
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[r.id for r in runs])),
            sort=ArtifactSort.CREATED_DESC, limit=1)
    return found[0].id if found else None


@stage_task("report", run_name="report: publish the artifacts")
def report_task(store_url: str, relative: str, key: str) -> dict[str, Any]:
    """Publish the artifacts of a stored report (see `publish_report`)."""
    return publish_report(Store(store_url), relative, key)


@dataclass
class CallProgress:
    """The call stage's progress in calls (see the module docstring). The flow creates it
    (`start`) and moves it as shards finish; a shard task gets it as a dict (`to_dict`,
    with `base` the calls done before the shard) and moves it while it calls. An update is
    a server round trip (≈0.1 s on SQLite), so it is sent at most every `EVERY_S` seconds,
    and at the end."""

    EVERY_S = 5.0

    total: int
    artifact_id: str
    started: float = field(default_factory=time.time)  # wall clock: shared across processes
    base: int = 0
    updated: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, total: int, run_id: str) -> CallProgress:
        artifact = create_progress_artifact(0.0, description=f"backend calls of run {run_id}")
        set_progress_labels(0.0, f"results: 0/{total} calls")
        return cls(total, str(artifact))

    def to_dict(self, base: int) -> dict[str, Any]:
        return {"total": self.total, "artifact_id": self.artifact_id, "started": self.started,
                "base": base}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallProgress:
        return cls(data["total"], data["artifact_id"], data["started"], data["base"])

    def report(self, done: int, *, final: bool = False) -> None:
        """`done` calls of `total` so far; sent if `EVERY_S` passed or `final`. The flow
        run's labels `PROGRESS_SHARE` and `PROGRESS_LINE` follow: should its process die,
        the crash automation's final progress artifact says where it stopped."""
        from decflow.views.progress_text import progress_line

        now = time.monotonic()
        if not final and now - self.updated < self.EVERY_S:
            return
        self.updated = now
        line = progress_line(done, self.total, time.time() - self.started, "calls", "results")
        share = 100.0 * done / self.total if self.total else 100.0
        update_progress_artifact(UUID(self.artifact_id), share, description=line)
        set_progress_labels(share, f"results: {done}/{self.total} calls")
        get_run_logger().info("%s", line)


    def settle(self, calls: int, reason: str) -> None:
        """A sequential run's calls are over: `calls` sent, stopped for `reason` (the
        total was the full suite's, an upper bound)."""
        from decflow.views.progress_text import progress_line

        line = progress_line(calls, calls, time.time() - self.started, "calls", "results")
        update_progress_artifact(UUID(self.artifact_id), 100.0, description=(
            f"{line}; stopped: {reason} ({self.total} calls at most)"))
        set_progress_labels(100.0, f"results: {calls}/{calls} calls")
        get_run_logger().info("%s; stopped: %s", line, reason)


def set_progress_labels(share: float, line: str) -> None:
    """Where the current flow run's calls are (see `CallProgress.report`)."""
    run_id = flow_run.id
    if not run_id:
        return
    with get_client(sync_client=True) as client:
        client.update_flow_run_labels(UUID(run_id), {PROGRESS_SHARE: round(share, 2),
                                                     PROGRESS_LINE: line})
