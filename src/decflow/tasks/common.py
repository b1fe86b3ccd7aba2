"""Task settings shared by every decflow task.

Prefect's own caching and result persistence are off: tasks take and return small JSON
manifests, and the content-addressed store is the cache (a stage whose key is published
is a hit there, whichever process or machine computed it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.states import Failed

from decflow.errors import DecflowError
from decflow.pipeline.spec import RunSpec
from decflow.report.model import Report
from decflow.report.sections import report_headline
from decflow.store.store import Manifest, Store
from decflow.tasks import logs

P = ParamSpec("P")
R = TypeVar("R")
SHARD_RETRIES = 2
SHARD_RETRY_DELAY_S = 2.0

logs.install()


def transient(_task: Task[Any, Any], _run: TaskRun, state: State[Any]) -> bool:
    """Retry a failed shard unless it failed for a reason a retry cannot change: a user
    error, or a shard that ended Failed without raising (its calls failed and their errors
    are recorded: a retry would send nothing)."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, Exception) and not isinstance(error, DecflowError)


def stage_task(
    name: str, run_name: str | Callable[[], str], *, retries: int = 0
) -> Callable[[Callable[P, R]], Task[P, R]]:
    """A thin task named after its stage, with Prefect caching and persistence off. Its
    runs are named `run_name` (a template of its parameters, or a function), which starts
    with the stage and says what the run does: Prefect adds no random suffix then."""

    def decorate(fn: Callable[P, R]) -> Task[P, R]:
        return task(
            name=name,
            cache_policy=NO_CACHE,
            persist_result=False,
            task_run_name=run_name,
            retries=retries,  # only call shards retry
            retry_delay_seconds=SHARD_RETRY_DELAY_S if retries else None,
            retry_condition_fn=transient if retries else None,
        )(fn)

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
