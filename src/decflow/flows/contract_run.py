"""The `contract_run` flow (modes test / fuzz / all / stability) and the run it shares with
`nightly_regression`.

It runs the contract-run pipeline (`CONTRACT_RUN`) through the generic stage loop
(`flows/stage_loop.py`): every stage is a task named after it, except a `sharded` one (the
call stage), whose shard loop (`call_stage`) runs in the flow and submits each shard as a
task (`PrefectShards`). `--resume RUN` reruns the same steps (finished stages are store
hits, finished chunks are not re-sent); `--from-stage` reuses the stored upstream
manifests of the run.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.futures import as_completed
from prefect.runtime import flow_run

from decflow.errors import DecflowError
from decflow.flows.common import Verdict, decflow_run, finish, flow_result, task_value
from decflow.flows.crash_by_heartbeat import watched_run
from decflow.flows.runners import build_task_runner
from decflow.flows.server import prefect_server
from decflow.flows.stage_loop import run_pipeline, stopped_message
from decflow.pipeline.contract_run.results import RequestParts, left_to_send, recorded_count
from decflow.pipeline.contract_run.resume import resumed_spec
from decflow.pipeline.contract_run.runner import CONTRACT_RUN
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.pipeline.stage import RunContext
from decflow.store.runs import (
    FINISHED,
    REPORT,
    has_run,
    read_run_json,
    read_run_record,
    report_path,
)
from decflow.store.store import Manifest, Store
from decflow.tasks.common import outcome
from decflow.tasks.report import CallProgress, artifact_key, report_task
from decflow.tasks.stages import (
    finish_results_task,
    health_task,
    originals_task,
    sequential_group_task,
    shard_run_name,
    shard_task,
)


def decision_name(contract_path: str) -> str:
    try:
        return str(load_contract_cached(contract_path).contract.decision.name)
    except DecflowError:
        return contract_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def run_label(spec: dict[str, Any]) -> str:
    """<decision>-<mode>-<backend>: what flow run names start with."""
    return f"{decision_name(spec['contract_path'])}-{spec['mode']}-{spec['backend']}"


def _contract_run_name() -> str:
    spec = flow_run.parameters["spec"]
    return f"{run_label(spec)}-{spec['run_id']}"


class PrefectShards:
    """The call stage's steps as tasks of the current flow run (see `call_stage`); shards
    run one after another (each moving the progress artifact as its calls come back), or
    all submitted at once to a Dask cluster (the progress moves as shards finish)."""

    def __init__(self, context: RunContext, key: str, _parts: RequestParts,
                 parallel: bool) -> None:
        self.spec = context.spec.to_dict()
        self.requests_key = context.manifests["requests"].key
        self.cases_key = context.manifests["cases"].key
        self.key, self.parallel = key, parallel
        recorded = recorded_count(context.store, key)  # a resumed run counts what is left
        self.progress = CallProgress.start(
            left_to_send(context.manifests["requests"].rows, recorded), context.spec.run_id)
        self.done = 0

    def health(self) -> dict[str, str] | None:
        health: dict[str, str] | None = health_task(self.spec)
        return health

    def run(self, phase: str, shards: int) -> None:
        args = (self.spec, self.requests_key, self.key, phase)

        def shard(index: int) -> Any:
            return shard_task.with_options(task_run_name=shard_run_name(phase, index, shards))

        if self.parallel:
            futures = [shard(index).submit(*args, index) for index in range(shards)]
            for future in as_completed(futures):
                # the final state from the Dask future itself: the API's may still say
                # RUNNING for a shard that took milliseconds (all answers from the cache)
                future.wait()
                self.done += task_value(future.state)
                self.progress.report(self.done)
            return
        for index in range(shards):
            self.done += task_value(shard(index)(*args, index, self.progress.to_dict(self.done),
                                                 return_state=True))
            self.progress.report(self.done)

    def check_originals(self) -> None:
        originals_task(self.spec, self.requests_key, self.key)

    def sequential_group(self, start: int, end: int) -> dict[str, Any]:
        """A sequential run's batches `start`..`end` as one task (see `sequential.calls`),
        on a Dask worker when the run has a cluster; the progress moves as its batches
        come back and is final once the run stops (the calls it made, why it stopped)."""
        args = (self.spec, self.cases_key, self.requests_key, self.key, start, end,
                self.progress.to_dict(0))
        outcome: dict[str, Any] = (sequential_group_task.submit(*args).result()
                                   if self.parallel else sequential_group_task(*args))
        if outcome["stopped"]:
            self.progress.settle(outcome["calls_made"], outcome["stop_reason"])
        else:
            self.progress.report(outcome["requests_sent"])
        return outcome

    def finish(self, health: dict[str, str] | None) -> Manifest:
        manifest = Manifest.from_dict(finish_results_task(self.spec, self.requests_key,
                                                          self.key, health))
        self.progress.report(self.progress.total, final=True)  # every request answered
        return manifest


def run_stages(
    spec: RunSpec, *, from_stage: str | None = None, fail_on_warn: bool = False,
    parallel_shards: bool = False,
) -> dict[str, Any]:
    """Every stage of a contract run as tasks of the current flow run; returns the run's
    id, status, exit code, headline and the store path of its report."""

    def shards(context: RunContext, key: str, parts: RequestParts) -> PrefectShards:
        return PrefectShards(context, key, parts, parallel_shards)

    return run_pipeline(CONTRACT_RUN, spec, from_stage=from_stage, fail_on_warn=fail_on_warn,
                        shards=shards)


def published_outcome(store: Store, run_id: str, key: str) -> dict[str, Any]:
    """The outcome of a finished stored run, its artifacts published (again) under `key`:
    what a retried flow run of it reports, nothing computed or sent."""
    relative = report_path(run_id)
    found = outcome(read_run_json(store, run_id, REPORT), relative)
    published = report_task(store.location, relative, key)
    return {"run_id": run_id, **found, "caveats": published["caveats"]}


def continued_run(spec: RunSpec, *, from_stage: str | None = None, fail_on_warn: bool = False,
                  parallel_shards: bool = False) -> dict[str, Any]:
    """Decflow run `spec.run_id` in this flow run. A retried flow run continues the run its
    earlier attempt started: a finished one is re-published as it is, an unfinished one
    resumed (answered requests are not sent again; a contract changed since is refused,
    exit 2); a run not in the store yet is made."""
    store = Store(spec.store_url)
    if from_stage is None and has_run(store, spec.run_id):
        if read_run_record(store, spec.run_id).get("status") in FINISHED:
            key = artifact_key(decision_name(spec.contract_path), spec.backend, spec.mode)
            return published_outcome(store, spec.run_id, key)
        spec = resumed_spec(store, spec.run_id, spec.contract_path, spec.mode)
    return run_stages(spec, from_stage=from_stage, fail_on_warn=fail_on_warn,
                      parallel_shards=parallel_shards)


@flow(name="contract_run", flow_run_name=_contract_run_name, persist_result=False)
def contract_run(
    spec: dict[str, Any],
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    parallel_shards: bool = False,
) -> State[Any]:
    """A contract run (`spec` is `RunSpec.to_dict()`); returns its outcome (run id, status,
    exit code, headline, store path of the report); a FAIL ends the flow run Failed (see
    `flows.common`)."""
    run_spec = RunSpec.from_dict(spec)
    with decflow_run(run_spec.run_id, run_label(spec), stopped_message(CONTRACT_RUN, run_spec)):
        found = continued_run(run_spec, from_stage=from_stage, fail_on_warn=fail_on_warn,
                              parallel_shards=parallel_shards)
        return finish(found, Verdict(found))


def run_contract_flow(
    spec: dict[str, Any],
    *,
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    task_runner: str = "thread",
    dask_address: str | None = None,
) -> dict[str, Any]:
    """What the CLI calls for `--prefect`: the flow with the chosen task runner; returns
    the stored report (a FAIL is the report's exit code 1, not a failed call)."""
    runner = build_task_runner(task_runner, dask_address)
    configured = contract_run.with_options(task_runner=runner)
    # heartbeats, so a killed run ends Crashed (see crash_by_heartbeat for their cost)
    with prefect_server(), watched_run():
        state = configured(
            spec=spec, from_stage=from_stage, fail_on_warn=fail_on_warn,
            parallel_shards=task_runner == "dask", return_state=True,
        )
    outcome: dict[str, Any] = flow_result(state)
    report: dict[str, Any] = Store(spec["store_url"]).read_json(outcome["report"])
    return report
