"""Flow runs that are killed (SIGKILL, out of memory, a lost machine) end Crashed in the
Prefect UI, their task runs too, instead of staying Running forever.

A flow process reports its own end; a killed one cannot. So decflow's flow runs send a
heartbeat event every `HEARTBEAT_S` seconds, and so does each of their open task runs
(`decflow.flows.task_heartbeats`, sent by the flow's process), all carrying the tag
`WATCHED_TAG`; two server-side automations with *proactive* triggers (they fire on the
absence of events) act when, after a heartbeat, neither another one nor a final state
arrives within the window:

- for a flow run: set it Crashed, write an ERROR log line on it naming the decflow run and
  the command that resumes it (the run's label `decflow.crash`), and add a final progress
  artifact saying where its calls stopped (the labels `tasks.report.PROGRESS_*`, which its
  progress artifact's updates keep current);
- for a task run: send the server the task run's `Crashed` state event (task-run states are
  recorded from events).

The automations' webhooks call the server's own API (`events`, `logs/`, `artifacts/`; saved
as Webhook blocks `decflow-crash-…`), so a lost machine's runs are closed with nothing else
running. The server makes those calls, so their URL must be one the *server* reaches: the
blocks keep the URL they were created with (the first setup's PREFECT_API_URL, or
`decflow prefect-setup --api-url URL`), and a later deploy or setup from a client that
reaches the server another way (a tunnel, a proxy, a mapped port) leaves it as it is.
Only runs with the tag are watched: a run that heartbeats at Prefect's default (every
180 s) would otherwise be crashed while alive. A killed run whose follower process
survives is Crashed sooner, by the follower (`decflow.flows.crash_by_follower`).

`watched_run()` is what the CLI's flow runs and `decflow serve` run under; deployments
served by a worker get the same from `deployments/prefect.yaml` (tag and heartbeat
environment). `ensure_crash_automation` creates or updates the automations and webhooks
(idempotent): `decflow deploy`, `decflow serve` and `decflow prefect-setup` call it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast
from uuid import UUID

from prefect import get_client, tags
from prefect.blocks.webhook import Webhook
from prefect.client.schemas.objects import StateType
from prefect.events.actions import CallWebhook, ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.exceptions import ObjectNotFound
from prefect.settings import (
    PREFECT_API_AUTH_STRING,
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)

from decflow.errors import DecflowError
from decflow.tasks.heartbeat import (
    DEFAULT_WINDOW_S,
    HEARTBEAT_S,
    MIN_WINDOW_S,
    TASK_HEARTBEAT,
    WATCHED_TAG,
)
from decflow.tasks.report import PROGRESS_LINE, PROGRESS_SHARE

AUTOMATION_NAME = "decflow: crash flow runs without heartbeats"
TASK_AUTOMATION_NAME = "decflow: crash task runs without heartbeats"
HEARTBEAT = "prefect.flow-run.heartbeat"
FINAL_STATES = ("Completed", "Failed", "Cancelled", "Crashed")
CRASH_LABEL = "decflow.crash"  # the crash message: the run and the command resuming it
# the webhooks the automations call: block name -> API path (POST)
HOOKS = {"decflow-crash-events": "events", "decflow-crash-logs": "logs/",
         "decflow-crash-artifacts": "artifacts/"}

# A task run's Crashed state as the event the server records task-run states from, made of
# the last event seen for it (its Running state or heartbeat, which carry its fields), its
# end the firing's time (JSON's last key wins over one the fields already hold).
TASK_CRASHED = """[{"id": "{{ firing.id }}", "occurred": "{{ firing.triggered }}",
 "event": "prefect.task-run.Crashed",
 "resource": {"prefect.resource.id": "{{ event.resource.id }}",
  "prefect.resource.name": {{ event.resource.name | tojson }},
  "prefect.state-type": "CRASHED", "prefect.state-name": "Crashed",
  "prefect.state-message": {{ message | tojson }}, "prefect.orchestration": "client"},
 "related": {{ event.related | tojson }},
 "payload": {"intended": {"from": "RUNNING", "to": "CRASHED"},
  "initial_state": {"type": "RUNNING", "name": "Running", "message": "", "state_details": {}},
  "validated_state": {"type": "CRASHED", "name": "Crashed", "message": {{ message | tojson }},
   "state_details": {}, "data": null},
  "task_run": {{ (event.payload.task_run | tojson)[:-1] }},
   "end_time": "{{ firing.triggered }}"}}}]"""
CRASH_LOG = """[{"name": "decflow.crash", "level": 40, "timestamp": "{{ firing.triggered }}",
 "flow_run_id": "{{ flow_run.id }}",
 "message": {{ (prefix ~ flow_run.labels.get(crash, "")) | tojson }}}]"""
FINAL_PROGRESS = """{"type": "progress", "flow_run_id": "{{ flow_run.id }}",
 "data": {{ flow_run.labels.get(share, 0) | tojson }},
 "description": {{ ("stopped" ~ ((" at " ~ flow_run.labels[line]) if line in flow_run.labels
                   else "") ~ ": " ~ prefix ~ flow_run.labels.get(crash, "")) | tojson }}}"""


@contextmanager
def watched_run() -> Iterator[None]:
    """Flow runs started inside send heartbeats every `HEARTBEAT_S` s and are watched."""
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: HEARTBEAT_S}), \
            tags(WATCHED_TAG):
        yield


def _silent(resource: str, heartbeat: str, window_s: float,
            waiting: tuple[str, ...] = ()) -> EventTrigger:
    """A watched run of `resource` (flow-run or task-run) with no `heartbeat` and no final
    state for `window_s` seconds after it started running or sent a heartbeat; a state in
    `waiting` (a task run's Pending: it runs at once) must be left within the window too."""
    events = f"prefect.{resource}"
    return EventTrigger(
        match=ResourceSpecification({"prefect.resource.id": f"{events}.*"}),
        match_related=ResourceSpecification({
            "prefect.resource.role": "tag",
            "prefect.resource.id": f"prefect.tag.{WATCHED_TAG}",
        }),
        after={heartbeat, f"{events}.Running", *(f"{events}.{s}" for s in waiting)},
        expect={heartbeat, *(f"{events}.{state}" for state in FINAL_STATES),
                *([f"{events}.Running"] if waiting else [])},
        for_each={"prefect.resource.id"},
        posture=Posture.Proactive,
        threshold=1,
        within=timedelta(seconds=window_s),
    )


def _template(text: str, **values: str) -> str:
    """A Jinja template with `values` set first (quoted for Jinja)."""
    sets = "".join(f"{{% set {name} = {json.dumps(value)} %}}" for name, value in values.items())
    return sets + text


def crash_automations(window_s: float, hooks: dict[str, UUID]) -> list[AutomationCore]:
    """The automations (see the module docstring); `hooks` are the webhook blocks' ids by
    name (`HOOKS`)."""
    if window_s < MIN_WINDOW_S:
        raise DecflowError(f"the crash window must be at least {MIN_WINDOW_S} s (heartbeats "
                           f"come every {HEARTBEAT_S} s); got {window_s:g} s")
    silent = f"No heartbeat for {window_s:g} s: "
    flow_runs = AutomationCore(
        name=AUTOMATION_NAME,
        description=(f"Flow runs tagged {WATCHED_TAG} send a heartbeat every {HEARTBEAT_S} s; "
                     f"one silent for {window_s:g} s was killed: mark it Crashed, log how to "
                     "resume it, finish its progress artifact."),
        trigger=_silent("flow-run", HEARTBEAT, window_s),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"{silent}the flow run's process was killed or lost (decflow crash "
                        "detection); its log says how to resume it.",
            ),
            CallWebhook(block_document_id=hooks["decflow-crash-logs"],
                        payload=_template(CRASH_LOG, prefix=silent, crash=CRASH_LABEL)),
            CallWebhook(block_document_id=hooks["decflow-crash-artifacts"],
                        payload=_template(FINAL_PROGRESS, prefix=silent, crash=CRASH_LABEL,
                                          share=PROGRESS_SHARE, line=PROGRESS_LINE)),
        ],
    )
    task_runs = AutomationCore(
        name=TASK_AUTOMATION_NAME,
        description=(f"The open task runs of flow runs tagged {WATCHED_TAG} send a heartbeat "
                     f"every {HEARTBEAT_S} s; one silent for {window_s:g} s lost its process: "
                     "mark it Crashed."),
        trigger=_silent("task-run", TASK_HEARTBEAT, window_s, waiting=("Pending",)),
        actions=[CallWebhook(
            block_document_id=hooks["decflow-crash-events"],
            payload=_template(TASK_CRASHED, message=(
                f"{silent}the flow run's process died while this task ran (decflow crash "
                "detection)."))),
        ],
    )
    return [flow_runs, task_runs]


def _canonical(value: Any) -> Any:
    """JSON with set-valued fields (serialized as lists in any order) sorted."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        return sorted(items) if all(isinstance(v, str) for v in items) else items
    return value


def _shape(automation: AutomationCore) -> Any:
    """What the automation does (not its server id)."""
    data = automation.model_dump(mode="json", include={"description", "enabled", "trigger",
                                                       "actions"})
    data["trigger"].pop("id", None)
    return _canonical(json.loads(json.dumps(data)))


def _saved_api(client: Any) -> tuple[str | None, dict[str, UUID]]:
    """The API URL the saved webhook blocks call (None unless all of them call the same
    one) and their ids."""
    bases, ids = set(), {}
    for name, path in HOOKS.items():
        try:
            document = client.read_block_document_by_name(name, block_type_slug="webhook")
        except ObjectNotFound:
            return None, {}
        url = str(document.data.get("url") or "")
        bases.add(url[:-len(path)].rstrip("/") if url.endswith(f"/{path}") else None)
        ids[name] = document.id
    (base, *others) = bases
    return (base, ids) if base and not others else (None, {})


def _webhooks(client: Any, api_url: str | None) -> tuple[dict[str, UUID], str, bool]:
    """The webhook blocks the automations call, POSTs to the server's own API at `api_url`
    (with this client's credentials when it has some), that URL, and whether it moved.
    Without `api_url`, saved blocks are kept as they are (this client may reach the server
    by a URL the server cannot, see the module docstring); missing ones call
    PREFECT_API_URL."""
    saved, ids = _saved_api(client)
    if api_url is None and saved is not None:
        return ids, saved, False
    api = (api_url or saved or str(PREFECT_API_URL.value())).rstrip("/")
    headers = {"Content-Type": "application/json"}
    auth = PREFECT_API_AUTH_STRING.value()
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(
            auth.get_secret_value().encode() if hasattr(auth, "get_secret_value")
            else str(auth).encode()).decode()
    found = {}
    for name, path in HOOKS.items():
        block = Webhook(method="POST", url=f"{api}/{path}", headers=headers,
                        allow_private_urls=True)
        found[name] = cast(UUID, block.save(name, overwrite=True))
    return found, api, saved not in (None, api)


@dataclass(frozen=True)
class CrashDetection:
    """What `ensure_crash_automation` did (`created`, `updated` or `unchanged`), the
    window in seconds and the API URL the webhooks call."""

    done: str
    window_s: float
    api_url: str


def ensure_crash_automation(window_s: float | None = None,
                            api_url: str | None = None) -> CrashDetection:
    """Create the automations and their webhooks, or bring them to this definition;
    `window_s=None` keeps the window of an existing one (else `DEFAULT_WINDOW_S`),
    `api_url=None` the URL saved webhooks call (see `_webhooks`)."""
    with get_client(sync_client=True) as client:
        existing = {name: client.read_automations_by_name(name)
                    for name in (AUTOMATION_NAME, TASK_AUTOMATION_NAME)}
        current = existing[AUTOMATION_NAME]
        if window_s is None:
            window_s = (current[0].trigger.within.total_seconds()
                        if current and isinstance(current[0].trigger, EventTrigger)
                        else DEFAULT_WINDOW_S)
        hooks, api, moved = _webhooks(client, api_url)
        wanted = crash_automations(window_s, hooks)
        done = {"updated"} if moved else set()
        for automation in wanted:
            found = existing[automation.name]
            if not found:
                client.create_automation(automation)
                done.add("created")
                continue
            first, *extra = found
            for duplicate in extra:  # created by concurrent setups
                client.delete_automation(duplicate.id)
            if _shape(first) == _shape(automation) and not extra:
                done.add("unchanged")
                continue
            client.update_automation(first.id, automation)
            done.add("updated")
        summary = next(word for word in ("created", "updated", "unchanged") if word in done)
        return CrashDetection(summary, window_s, api)


def describe(found: CrashDetection) -> str:
    """One line on what `ensure_crash_automation` did."""
    return (f"crash detection {found.done}: the Prefect automations '{AUTOMATION_NAME}' and "
            f"'{TASK_AUTOMATION_NAME}' mark a flow run tagged {WATCHED_TAG}, and each of its "
            f"task runs, Crashed after {found.window_s:g} s without a heartbeat (decflow's "
            f"runs send one every {HEARTBEAT_S} s); the server closes them through its API at "
            f"{found.api_url} (it must reach that URL itself; `decflow prefect-setup "
            f"--api-url URL` changes it)")
