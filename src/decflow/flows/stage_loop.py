"""The one Prefect stage loop: any pipeline's stages as tasks of the current flow run,
through the same `RunBook` as the in-process driver (lock, run record, timings, `--resume`,
`--from-stage`).

Each stage is a task named after it (`tasks.stages.task_of`); a fanned-out stage first
submits one task per unit the store does not hold (named `<unit stage>: <what the unit
does>`; with the Dask task runner each worker reads only its units), then merges them in
its own task; a `sharded` stage (the contract run's call stage) runs in the flow, where its
compute submits its own tasks through the runner's `shards` factory. Tasks find the
pipeline by its `ref`, so a pipeline defined outside decflow runs here like the built-ins:
`pipeline_flow` runs any pipeline by its ref (the `contract_run` and `production_check`
flows are this loop with their own names, parameters and deployments).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run

from decflow.flows.common import Verdict, decflow_run, finish, task_value, unwalked
from decflow.flows.crash_by_follower import absolute, crash_message
from decflow.pipeline.driver import RunBook
from decflow.pipeline.pipeline import Pipeline, pipeline_at
from decflow.pipeline.stage import (
    Missing,
    S,
    Stage,
    StageContext,
    UnitOutcome,
    UnitRunner,
    run_units,
)
from decflow.store.store import Manifest, Store
from decflow.tasks.report import artifact_key, report_task
from decflow.tasks.stages import task_of, unit_task_of


def stopped_message(pipeline: Pipeline[S], spec: S) -> str:
    """What a crashed flow run of the run says: the command that resumes it, from any
    directory (absolute paths)."""
    anywhere = replace(spec, contract_path=absolute(spec.contract_path),
                       store_url=absolute(spec.store_url))
    return crash_message(f"run {spec.run_id}", f"resume it with `{pipeline.resume(anywhere)}`")


def prefect_units(pipeline: Pipeline[Any], contract: str, spec: dict[str, Any]) -> UnitRunner:
    """A fanned-out stage's `UnitRunner` in a flow: one task per unit to compute, named by
    the stage (`records: read unit 2 (4 records)`)."""

    def run(stage: Stage[Any], _context: StageContext[Any],
            missing: list[Missing]) -> list[UnitOutcome]:
        assert stage.fan_out is not None
        named, task = stage.fan_out, unit_task_of(stage)
        # plain, not `unwalked`: a task submitted to Dask would get the quote itself
        futures = [task.with_options(task_run_name=f"{named.name}: {named.title(unit)}")
                   .submit(pipeline.ref, contract, spec, index, key)
                   for index, unit, key in missing]
        return [UnitOutcome.from_dict(future.result()) for future in futures]

    return run


def run_pipeline(pipeline: Pipeline[S], spec: S, *, from_stage: str | None = None,
                 fail_on_warn: bool = False, **context: Any) -> dict[str, Any]:
    """Every stage of `pipeline` for `spec` as tasks of the current flow run (`context`:
    the rest of the stages' context, e.g. the call stage's `shards`); publishes the report's
    artifacts and returns the run's outcome: id, status, exit code, headline, store path of
    the report."""
    store = Store(spec.store_url)
    contract = absolute(spec.contract_path)  # workers may run in another directory
    spec_d = spec.to_dict()

    def as_task(book: RunBook[S], stage: Stage[S]) -> Manifest:
        outcomes = None
        if stage.fan_out is not None:  # its units as tasks, then the merge as one
            here = replace(book.context, unit_outcomes=[])
            outcomes = unwalked([o.to_dict() for o in run_units(stage, here)])
        manifests = unwalked({name: m.to_dict() for name, m in book.manifests.items()})
        # the verdict stage's task may end Failed (a FAIL) and still hand back its manifest
        return Manifest.from_dict(task_value(task_of(stage)(
            pipeline.ref, contract, unwalked(spec_d), manifests, fail_on_warn, outcomes,
            return_state=True)))

    with RunBook(pipeline, spec, store, from_stage=from_stage, logger=get_run_logger(),
                 fail_on_warn=fail_on_warn, units=prefect_units(pipeline, contract, spec_d),
                 **context) as book:
        for stage in book.stages:
            book.run(stage, None if stage.sharded else partial(as_task, book, stage))
    caveats: list[str] = []
    if pipeline.report is not None:  # a decflow report: its views as artifacts
        described = pipeline.describe(spec, book.manifests)
        key = artifact_key(book.loaded.contract.decision.name, described["backend"],
                           described["mode"])
        caveats = report_task(store.location, book.verdict["report"], key)["caveats"]
    return {"run_id": spec.run_id, **book.verdict, "caveats": caveats}


def _pipeline_run_name() -> str:
    return pipeline_at(flow_run.parameters["pipeline"]).name


@flow(name="pipeline", flow_run_name=_pipeline_run_name, persist_result=False)
def pipeline_flow(pipeline: str, spec: dict[str, Any], from_stage: str | None = None,
                  fail_on_warn: bool = False) -> State[Any]:
    """A run of any pipeline (`pipeline`: its `ref`; `spec`: its spec as JSON) through the
    stage loop, named and ended like every decflow flow run (`flows.common`): its outcome
    (run id, status, exit code, headline, report path), Failed on a FAIL."""
    found = pipeline_at(pipeline)
    run_spec = found.spec_from(spec)
    with decflow_run(run_spec.run_id, found.name, stopped_message(found, run_spec)):
        outcome = run_pipeline(found, run_spec, from_stage=from_stage,
                               fail_on_warn=fail_on_warn)
        return finish(outcome, Verdict(outcome))
