"""Flow runs that are killed (SIGKILL, out of memory, a lost machine) end Crashed in the
Prefect UI instead of staying Running forever.

A flow process reports its own end; a killed one cannot. So decflow's flow runs send a
heartbeat event every `HEARTBEAT_S` seconds and carry the tag `WATCHED_TAG`, and a
server-side automation with a *proactive* trigger (it fires on the absence of events)
marks a watched run Crashed when, after a heartbeat, neither another heartbeat nor a
final state arrives within its window. Only runs with the tag are watched: a run that
heartbeats at Prefect's default (every 180 s) would otherwise be crashed while alive.
A killed run whose follower process survives is Crashed sooner, by the follower
(`decflow.flows.crashes`), which also ends its task runs; the automation is for what the
follower cannot outlive (a lost machine).

`watched_run()` is what the CLI's flow runs and `decflow serve` run under; deployments
served by a worker get the same from `deployments/prefect.yaml` (tag and heartbeat
environment). `ensure_crash_automation` creates or updates the automation (idempotent):
`decflow deploy`, `decflow serve` and `decflow prefect-setup` call it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from prefect import get_client, tags
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from decflow.errors import DecflowError
from decflow.flows.heartbeat import DEFAULT_WINDOW_S, HEARTBEAT_S, MIN_WINDOW_S

WATCHED_TAG = "decflow-heartbeat"
AUTOMATION_NAME = "decflow: crash flow runs without heartbeats"
HEARTBEAT = "prefect.flow-run.heartbeat"
FINAL_STATES = ("Completed", "Failed", "Cancelled", "Crashed")


@contextmanager
def watched_run() -> Iterator[None]:
    """Flow runs started inside send heartbeats every `HEARTBEAT_S` s and are watched."""
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: HEARTBEAT_S}), \
            tags(WATCHED_TAG):
        yield


def crash_automation(window_s: float) -> AutomationCore:
    """The automation: a watched flow run with no heartbeat and no final state for
    `window_s` seconds after a heartbeat is set Crashed."""
    if window_s < MIN_WINDOW_S:
        raise DecflowError(f"the crash window must be at least {MIN_WINDOW_S} s (heartbeats "
                           f"come every {HEARTBEAT_S} s); got {window_s:g} s")
    return AutomationCore(
        name=AUTOMATION_NAME,
        description=(f"Flow runs tagged {WATCHED_TAG} send a heartbeat every {HEARTBEAT_S} s; "
                     f"one silent for {window_s:g} s was killed: mark it Crashed."),
        trigger=EventTrigger(
            match=ResourceSpecification({"prefect.resource.id": "prefect.flow-run.*"}),
            match_related=ResourceSpecification({
                "prefect.resource.role": "tag",
                "prefect.resource.id": f"prefect.tag.{WATCHED_TAG}",
            }),
            after={HEARTBEAT},
            expect={HEARTBEAT, *(f"prefect.flow-run.{state}" for state in FINAL_STATES)},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=window_s),
        ),
        actions=[ChangeFlowRunState(
            state=StateType.CRASHED,
            message=f"No heartbeat for {window_s:g} s: the flow run's process was killed or "
                    "lost (decflow crash detection).",
        )],
    )


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


def ensure_crash_automation(window_s: float | None = None) -> tuple[str, float]:
    """Create the automation, or bring it to this definition; `window_s=None` keeps the
    window of an existing one (else `DEFAULT_WINDOW_S`). Returns what was done
    (`created`, `updated` or `unchanged`) and the window in seconds."""
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(AUTOMATION_NAME)
        if window_s is None:
            window_s = (found[0].trigger.within.total_seconds()
                        if found and isinstance(found[0].trigger, EventTrigger)
                        else DEFAULT_WINDOW_S)
        wanted = crash_automation(window_s)
        if not found:
            client.create_automation(wanted)
            return "created", window_s
        current, *extra = found
        for duplicate in extra:  # created by concurrent setups
            client.delete_automation(duplicate.id)
        if _shape(current) == _shape(wanted) and not extra:
            return "unchanged", window_s
        client.update_automation(current.id, wanted)
        return "updated", window_s


def describe(done: str, window_s: float) -> str:
    """One line on what `ensure_crash_automation` did."""
    return (f"crash detection {done}: the Prefect automation '{AUTOMATION_NAME}' marks a "
            f"flow run tagged {WATCHED_TAG} Crashed after {window_s:g} s without a heartbeat "
            f"(decflow's runs send one every {HEARTBEAT_S} s)")
