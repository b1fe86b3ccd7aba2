"""Contract-run tasks: one per stage, one per shard of backend calls.

Every stage task runs the pipeline's own `Stage` through `run_stage` (key, cache lookup,
compute, manifest), so a stage computes exactly as in the in-process runner. Tasks take the
run's `RunSpec` as a dict and upstream manifests as dicts, and return a manifest dict. The
call stage runs in the flow itself (`flows.contract_run`), which submits its shards as
`results-shard` tasks around the `results-health`, `results-check-originals` and `results`
(publish) steps. Task runs are named `<stage>: <what it does>`, a shard's
`results: call backend (transformed, shard 1/3)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import task_run
from prefect.states import Failed

from decflow.errors import DecflowError
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.runner import STAGE_BY_NAME
from decflow.pipeline.contract_run.sequential_calls import sequential_group
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import StageContext, run_stage
from decflow.store.store import Manifest, Store
from decflow.tasks.common import (
    SHARD_RETRIES,
    judged,
    manifests_of,
    rename_task_run,
    spec_and_store,
    stage_task,
)
from decflow.tasks.report import CallProgress
from decflow.views.text import counted

Spec = dict[str, Any]
ManifestDict = dict[str, Any]


# What each stage's task run does, after the stage name.
STAGE_RUN_NAMES = {
    "cases": "cases: read the golden dataset",
    "requests": "requests: build the requests to send",
    "comparisons": "comparisons: compare transformed answers with the originals",
    "minimized": "minimized: shrink failing transformed cases",
    "summary": "summary: judge the gates, write the report",
}


def _stage_task(name: str) -> Any:
    stage = STAGE_BY_NAME[name]

    def compute(spec: Spec, manifests: dict[str, ManifestDict],
                fail_on_warn: bool = False) -> ManifestDict | State[ManifestDict]:
        run_spec, store = spec_and_store(spec)
        context = StageContext(run_spec, store, load_contract_cached(run_spec.contract_path),
                               manifests_of(manifests), fail_on_warn=fail_on_warn,
                               logger=get_run_logger())
        manifest = run_stage(stage, context)
        if not stage.verdict:
            return manifest.to_dict()
        # the summary judges the gates: its task run is Failed when a requirement fails
        return judged(manifest.extra["status"], manifest.extra["headline"], manifest.to_dict())

    compute.__name__ = compute.__qualname__ = f"{name}_task"
    return stage_task(name, STAGE_RUN_NAMES[name])(compute)


# One task per stage besides the call stage, named after it (the names Prefect shows).
STAGE_TASKS: dict[str, Callable[..., Any]] = {
    name: _stage_task(name) for name, stage in STAGE_BY_NAME.items() if not stage.sharded
}


@stage_task("results-health", "results: check the backend's health")
def health_task(spec: Spec) -> dict[str, str] | None:
    run_spec, _ = spec_and_store(spec)
    return results_stage.prepare_calls(run_spec)


# The call-stage steps take the requests stage's key (a small string, cheap to ship to a
# Dask worker) and read its manifest from the store.


def _requests(store: Store, key: str) -> Manifest:
    manifest = store.manifest("requests", key)
    if manifest is None:
        raise DecflowError(f"store {store.url}: no published requests stage {key}")
    return manifest


def shard_run_name(phase: str, index: int, shards: int) -> str:
    return f"results: call backend ({phase}, shard {index + 1}/{shards})"


@stage_task("results-shard", "results: call backend ({phase})", retries=SHARD_RETRIES)
def shard_task(spec: Spec, requests_key: str, key: str, phase: str, index: int,
               progress: dict[str, Any] | None = None) -> int | State[int]:
    """One shard of backend calls (the flow names its run with `shard_run_name`); a retry
    re-sends only requests without a recorded result. With `progress` (a `CallProgress`
    dict) the progress artifact moves as the shard's calls come back. Returns how many
    results it recorded, as a Failed state when every call of the shard failed."""
    run_spec, store = spec_and_store(spec)
    moved = None
    if progress is not None:
        reporter = CallProgress.from_dict(progress)

        def moved(shard_done: int, _shard_total: int | None) -> None:
            reporter.report(reporter.base + shard_done)

    done = results_stage.call_shard(
        run_spec, store, _requests(store, requests_key), key, phase, index, moved
    )
    errors = results_stage.shard_errors(store, key, phase, index)
    if errors.all_failed:  # not green: the run goes on (the summary counts the errors)
        return Failed(message=f"every call of this shard failed ({errors.errors} of "
                              f"{errors.results}); first: {errors.first}", data=done)
    return done


def _sequential_run_name() -> str:
    return (f"results: sequential batches {task_run.parameters['start'] + 1}-"
            f"{task_run.parameters['end']}")


def sequential_run_name(start: int, batches: int, calls: int) -> str:
    """What a sequential group's task run did: `results: sequential batches 9-12 (64
    calls)` (`start` is the index of its first batch)."""
    return f"results: sequential batches {start + 1}-{batches} ({counted(calls, 'call')})"


@stage_task("results-sequential", _sequential_run_name, retries=SHARD_RETRIES)
def sequential_group_task(spec: Spec, cases_key: str, requests_key: str, key: str,
                          start: int, end: int,
                          progress: dict[str, Any] | None = None) -> dict[str, Any]:
    """A sequential run's batches `start`..`end` (a group of about a shard of requests),
    or fewer once the gates are settled: the task run is named by the batches it judged
    and the calls it sent (`sequential_run_name`); with `progress` (a `CallProgress`
    dict) the progress artifact counts the calls as its batches come back."""
    run_spec, store = spec_and_store(spec)
    factory = None
    if progress is not None:
        reporter = CallProgress.from_dict(progress)

        def factory(_stage: str, _total: int | None) -> Callable[[int, int | None], None]:
            return lambda done, _total: reporter.report(reporter.base + done)

    outcome = sequential_group(run_spec, store, cases_key, requests_key, key, start, end,
                               factory)
    rename_task_run(sequential_run_name(start, outcome["batches"], outcome["calls"]))
    return outcome


@stage_task("results-check-originals", "results: check that some originals were answered")
def originals_task(spec: Spec, requests_key: str, key: str) -> None:
    run_spec, store = spec_and_store(spec)
    results_stage.check_originals(run_spec, store, _requests(store, requests_key), key)


@stage_task("results", "results: publish the answers")
def finish_results_task(
    spec: Spec, requests_key: str, key: str, health: dict[str, str] | None
) -> ManifestDict:
    run_spec, store = spec_and_store(spec)
    manifest = results_stage.finish_results(
        run_spec, store, _requests(store, requests_key), key, health
    )
    return manifest.to_dict()
