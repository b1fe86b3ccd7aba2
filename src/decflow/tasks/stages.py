"""The tasks of the generic stage loop (`flows/stage_loop.py`): one per stage of any
pipeline, one per unit of a fanned-out stage, plus the steps of the contract run's call
stage and a check's plan of its records.

Every stage task runs the pipeline's own `Stage` through `run_stage` (key, cache lookup,
compute, manifest), so a stage computes exactly as in the in-process driver. A task finds
its pipeline by reference (`Pipeline.ref`) and takes the run's spec and upstream manifests
as dicts, returning a manifest dict. Task runs are named `<stage>: <title>` from the
stage's own `title` (`cases: read the golden dataset`); a unit's `<unit stage>: <what the
unit does>` (`records: read unit 1 (4 records)`). The call stage runs in the flow itself
(`flows.contract_run`), which submits its shards as `results-shard` tasks around the
`results-health`, `results-check-originals` and `results` (publish) steps, a shard named
`results: call backend (transformed, shard 1/3)`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from prefect import Task, get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import task_run
from prefect.states import Failed

from decflow.data.records.units import plan_source
from decflow.errors import DecflowError
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.sequential.calls import sequential_group
from decflow.pipeline.pipeline import pipeline_at
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import Stage, StageContext, UnitOutcome, run_stage
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


def _context(pipeline: str, contract: str, spec: Spec, manifests: dict[str, ManifestDict],
             fail_on_warn: bool) -> tuple[Any, StageContext[Any]]:
    """The pipeline at `pipeline` and a context of its stages in this task: the contract
    read from `contract` (an absolute path: workers may run elsewhere), units read here."""
    found = pipeline_at(pipeline)
    run_spec = found.spec_from(spec)
    context = found.context(run_spec, Store(run_spec.store_url), load_contract_cached(contract),
                            manifests_of(manifests), fail_on_warn=fail_on_warn,
                            logger=get_run_logger())
    return found, context


def task_of(stage: Stage[Any]) -> Callable[..., Any]:
    """The task of a stage of any pipeline, named after it (the names Prefect shows)."""
    return _stage_task(stage.name, stage.title)


@cache
def _stage_task(name: str, title: str) -> Task[..., Any]:
    def compute(pipeline: str, contract: str, spec: Spec, manifests: dict[str, ManifestDict],
                fail_on_warn: bool = False,
                outcomes: list[dict[str, Any]] | None = None
                ) -> ManifestDict | State[ManifestDict]:
        found, context = _context(pipeline, contract, spec, manifests, fail_on_warn)
        if outcomes is not None:  # a fanned-out stage: its units as the flow ran them
            context.unit_outcomes[:] = [UnitOutcome.from_dict(o) for o in outcomes]
        stage = found.stage(name)
        manifest = run_stage(stage, context)
        if not stage.verdict:
            return manifest.to_dict()
        # the verdict stage judges the gates: its task run is Failed when a requirement fails
        return judged(manifest.extra["status"], manifest.extra["headline"], manifest.to_dict())

    compute.__name__ = compute.__qualname__ = f"{name}_task"
    return stage_task(name, f"{name}: {title}")(compute)


def unit_task_of(stage: Stage[Any]) -> Task[..., dict[str, Any]]:
    """The task of one unit of a fanned-out stage (the flow names each of its runs)."""
    assert stage.fan_out is not None
    return _unit_task(stage.name, stage.fan_out.name)


@cache
def _unit_task(name: str, unit_name: str) -> Task[..., dict[str, Any]]:
    def compute(pipeline: str, contract: str, spec: Spec, index: int,
                key: str) -> dict[str, Any]:
        found, context = _context(pipeline, contract, spec, {}, False)
        fan_out = found.stage(name).fan_out
        unit = fan_out.units(context)[index]
        return fan_out.compute(context, unit, key).to_dict()  # type: ignore[no-any-return]

    compute.__name__ = compute.__qualname__ = f"{unit_name}_task"
    return stage_task(unit_name, f"{unit_name}: one unit")(compute)


@stage_task("records-plan", "records-plan: hash, count and split the records")
def plan_task(records: str) -> dict[str, Any]:
    """Hash and count a check's record files and split them into units (small JSON)."""
    return plan_source(records, absolute=True).to_dict()


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
