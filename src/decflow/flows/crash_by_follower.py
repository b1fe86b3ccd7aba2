"""A killed flow run ends Crashed with nothing left Running, and says how to resume it.

A flow's process cannot report its own death, and Prefect records task-run states from the
events that process sends: when it is killed, the flow run and the task it was running
stay Running. Two things end them:

- Each decflow flow run starts a follower process (`decflow.flows.follower`, in a session
  of its own, so a signal to the flow's process group spares it) holding one end of a
  pipe from the flow's process. When the flow's process dies before its body finished, the
  follower sets the flow run Crashed with the run's crash message (the decflow run id and
  the command that resumes it) and every task run of it not in a final state Crashed too.
- When the follower dies as well (a lost machine), the heartbeat automation
  (`crash_by_heartbeat`) marks the flow run Crashed; the next decflow flow run to start, on
  any machine, finishes the job (`follow_up_crashed_runs`): the leftover task runs Crashed
  and the crash message, kept as the flow run's label `decflow.crash`, added to the state.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterState,
    FlowRunFilterStateType,
    FlowRunFilterTags,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import TERMINAL_STATES, FlowRun, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.runtime import flow_run
from prefect.settings import PREFECT_API_URL
from prefect.states import Crashed

from decflow.flows.crash_by_heartbeat import CRASH_LABEL
from decflow.tasks.heartbeat import FINISHED, WATCHED_TAG

TASK_MESSAGE = "The flow run's process died while this task ran (decflow crash handling)."
OPEN_STATES = sorted(set(StateType) - TERMINAL_STATES)
# Crashed runs looked at when a flow run starts: the latest ones (older ones were followed
# up by the runs that started since).
FOLLOW_UP_RUNS = 20


def absolute(path: str) -> str:
    """A local path as any directory finds it; a URL as it is (crash messages are read
    far from where the run started)."""
    return path if "://" in path else os.path.abspath(path)


def crash_message(what: str, resume: str) -> str:
    """`decflow run R: … resume it with `<command>``, one line."""
    return (f"decflow {what}: its process died (killed, out of memory or lost) before it "
            f"finished; {resume}")


def _crash_open_task_runs(client: Any, flow_run_ids: list[UUID]) -> int:
    open_runs = client.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=flow_run_ids)),
        task_run_filter=TaskRunFilter(state=TaskRunFilterState(
            type=TaskRunFilterStateType(any_=OPEN_STATES))),
    )
    for task_run in open_runs:
        client.set_task_run_state(task_run.id, Crashed(message=TASK_MESSAGE), force=True)
    return len(open_runs)


def crash_flow_run(client: Any, flow_run_id: UUID, message: str) -> None:
    """The flow run (unless it finished) and its open task runs Crashed; a run something
    else marked Crashed first (the heartbeat automation, a worker) gets `message` added."""
    run: FlowRun = client.read_flow_run(flow_run_id)
    state = run.state
    if state is None or not state.is_final():
        client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)
    elif state.is_crashed() and message not in (state.message or ""):
        client.set_flow_run_state(
            flow_run_id, Crashed(message=f"{state.message or ''} {message}".strip()),
            force=True)
    elif not state.is_crashed():
        return
    _crash_open_task_runs(client, [flow_run_id])


def follow_up_crashed_runs(client: Any) -> None:
    """Watched flow runs Crashed without their follower: message and task runs (see the
    module docstring)."""
    crashed = client.read_flow_runs(
        flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[WATCHED_TAG]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.CRASHED]))),
        sort=FlowRunSort.END_TIME_DESC, limit=FOLLOW_UP_RUNS)
    for run in crashed:
        message = run.labels.get(CRASH_LABEL)
        if isinstance(message, str) and message not in (run.state.message or ""):
            crash_flow_run(client, run.id, message)
    if crashed:
        _crash_open_task_runs(client, [run.id for run in crashed])


@contextmanager
def followed_run(message: str) -> Iterator[None]:
    """The body of a flow run, followed: should its process die inside, the run ends
    Crashed with `message` (see the module docstring). Without a Prefect server to reach
    from another process (the temporary one dies with this process) nothing is followed."""
    run_id = flow_run.id
    if not run_id or not PREFECT_API_URL.value():
        yield
        return
    with get_client(sync_client=True) as client:
        client.update_flow_run_labels(UUID(run_id), {CRASH_LABEL: message})
        follow_up_crashed_runs(client)
    # -P -s: the follower imports decflow from where this process does (PYTHONPATH kept)
    follower = subprocess.Popen(
        [sys.executable, "-P", "-s", "-m", "decflow.flows.follower", run_id, message],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        yield
    finally:
        assert follower.stdin is not None
        follower.stdin.write(FINISHED)
        follower.stdin.close()
        follower.wait()
