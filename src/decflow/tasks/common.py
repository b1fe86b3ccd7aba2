"""Task settings shared by every decflow task.

Prefect's own caching and result persistence are off: tasks take and return small JSON
manifests, and the content-addressed store is the cache (a stage whose key is published
is a hit there, whichever process or machine computed it).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.context import TaskRunContext
from prefect.events import emit_event
from prefect.events.schemas.events import RelatedResource
from prefect.settings import PREFECT_API_URL
from prefect.states import Failed

from decflow.errors import DecflowError
from decflow.pipeline.spec import RunSpec
from decflow.report.model import Report
from decflow.report.sections import report_headline
from decflow.store.store import Manifest, Store
from decflow.tasks import logs
from decflow.tasks.heartbeat import HEARTBEAT_S, TASK_HEARTBEAT, WATCHED_TAG

P = ParamSpec("P")
R = TypeVar("R")
SHARD_RETRIES = 2
SHARD_RETRY_DELAY_S = 2.0
# The fields of a task run its state events carry (the server records task runs from them).
TASK_RUN_FIELDS = {"name", "task_key", "dynamic_key", "empirical_policy", "tags", "labels",
                   "task_inputs", "run_count", "flow_run_run_count", "expected_start_time",
                   "start_time"}

logs.install()


def transient(_task: Task[Any, Any], _run: TaskRun, state: State[Any]) -> bool:
    """Retry a failed shard unless it failed for a reason a retry cannot change: a user
    error, or a shard that ended Failed without raising (its calls failed and their errors
    are recorded: a retry would send nothing)."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, Exception) and not isinstance(error, DecflowError)


@contextmanager
def beating() -> Iterator[None]:
    """Inside a task run: its heartbeat event (`TASK_HEARTBEAT`) every `HEARTBEAT_S`
    seconds from a thread, carrying the task run's fields (what the crash automation needs
    to end it Crashed, `flows.crash_by_heartbeat`). The thread is stopped and joined before
    the body's end is reported, so no heartbeat follows the task run's final state."""
    context = TaskRunContext.get()
    if context is None or not PREFECT_API_URL.value():
        yield
        return
    run = context.task_run
    related = [RelatedResource({"prefect.resource.id": f"prefect.tag.{WATCHED_TAG}",
                                "prefect.resource.role": "tag"})]
    if run.flow_run_id is not None:
        related.append(RelatedResource({"prefect.resource.id":
                                        f"prefect.flow-run.{run.flow_run_id}",
                                        "prefect.resource.role": "flow-run"}))
    fields = run.model_dump(mode="json", include=TASK_RUN_FIELDS)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            emit_event(TASK_HEARTBEAT, resource={"prefect.resource.id":
                                                 f"prefect.task-run.{run.id}",
                                                 "prefect.resource.name": run.name},
                       related=related, payload={"task_run": fields})

    thread = threading.Thread(target=beat, name=f"decflow heartbeat {run.name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def rename_task_run(name: str) -> None:
    """Rename the current task run to say what it did (its final state event carries the
    name the server keeps)."""
    context = TaskRunContext.get()
    if context is not None:
        context.task_run.name = name


def stage_task(
    name: str, run_name: str | Callable[[], str], *, retries: int = 0
) -> Callable[[Callable[P, R]], Task[P, R]]:
    """A thin task named after its stage, with Prefect caching and persistence off. Its
    runs are named `run_name` (a template of its parameters, or a function), which starts
    with the stage and says what the run does: Prefect adds no random suffix then. Its
    runs are tagged `WATCHED_TAG` and heartbeat while they run (`beating`)."""

    def decorate(fn: Callable[P, R]) -> Task[P, R]:
        @functools.wraps(fn)
        def beaten(*args: P.args, **kwargs: P.kwargs) -> R:
            with beating():
                return fn(*args, **kwargs)

        return task(
            name=name,
            cache_policy=NO_CACHE,
            persist_result=False,
            task_run_name=run_name,
            tags=[WATCHED_TAG],
            retries=retries,  # only call shards retry
            retry_delay_seconds=SHARD_RETRY_DELAY_S if retries else None,
            retry_condition_fn=transient if retries else None,
        )(beaten)

    return decorate


def spec_and_store(spec: dict[str, Any]) -> tuple[RunSpec, Store]:
    run_spec = RunSpec.from_dict(spec)
    return run_spec, Store(run_spec.store_url)


def outcome(report: dict[str, Any], relative: str) -> dict[str, Any]:
    """What a task returns for a report it stored: small, so Prefect does not walk the
    whole report (it visits every task input and result looking for futures)."""
    return {"status": report["status"], "exit_code": report["exit_code"],
            "headline": report_headline(report), "report": relative,
            "caveats": Report.view(report).caveats()}


def judged(status: str, headline: str, value: R) -> R | State[R]:
    """What the task that judges the gates returns: `value`, as a Failed state with the
    headline as its message when a requirement fails, so the failing stage is red in the
    run's graph (the flow reads `value` back with `flows.common.task_value`)."""
    if status == "fail":
        return Failed(message=headline, data=value)
    return value


def manifests_of(manifests: dict[str, dict[str, Any]]) -> dict[str, Manifest]:
    return {name: Manifest.from_dict(m) for name, m in manifests.items()}
