"""The `contract_run` flow (modes test / fuzz / all) and the stage sequence it shares with
`nightly_regression`.

The order mirrors `decflow.pipeline.contract_run.runner.run_contract` step for step: cases →
requests → results (health check, originals shards, originals check, transformed shards, publish)
→ comparisons → minimized (fuzz/all) → summary → report. `--resume RUN` reruns the same
steps (finished stages are store hits, finished chunks are not re-sent); `--from-stage`
reuses the stored upstream manifests of the run.
"""

from __future__ import annotations

import sys
from typing import Any

from prefect import flow, get_run_logger
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)
from prefect.utilities.annotations import quote

from decflow.errors import DecflowError
from decflow.flows.runners import build_task_runner
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.runner import RunBook
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.store.store import Manifest, Store
from decflow.tasks.report import CallProgress, artifact_key, report_task
from decflow.tasks.stages import (
    cases_task,
    comparisons_task,
    finish_results_task,
    health_task,
    minimized_task,
    originals_task,
    requests_task,
    shard_task,
    summary_task,
)


def decision_name(contract_path: str) -> str:
    try:
        return str(load_contract_cached(contract_path).contract.decision.name)
    except DecflowError:
        return contract_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def run_label(spec: dict[str, Any]) -> str:
    """<decision>-<mode>-<backend>: flow run names and artifact keys."""
    return f"{decision_name(spec['contract_path'])}-{spec['mode']}-{spec['backend']}"


def _contract_run_name() -> str:
    return run_label(flow_run.parameters["spec"])


def _dicts(manifests: dict[str, Manifest]) -> Any:
    """Manifests as task input, quoted: Prefect would otherwise walk every nested value
    of every task input (the requests manifest carries provenance; measured ≈0.1 s/task)."""
    return quote({name: m.to_dict() for name, m in manifests.items()})


def call_stage(spec: RunSpec, store: Store, requests: Manifest, parallel: bool) -> Manifest:
    """The results stage as tasks: health, shards per phase, originals check, publish."""
    logger = get_run_logger()
    key = results_stage.results_key(spec, requests)
    cached = store.manifest("results", key)
    if cached is not None:
        logger.info("stage results: cache hit (%s)", key[:12])
        return cached
    spec_d = spec.to_dict()
    health = health_task(spec_d)
    counts = {phase: results_stage.shard_count(store, spec, requests, phase)
              for phase in results_stage.PHASES}
    progress = CallProgress(sum(counts.values()),
                            f"backend calls of run {spec.run_id}: shards done")
    for phase in results_stage.PHASES:
        if phase == "transformed":
            originals_task(spec_d, requests.key, key)
        shards = range(counts[phase])
        if parallel:
            futures = [shard_task.submit(spec_d, requests.key, key, phase, i) for i in shards]
            for future in as_completed(futures):
                future.result()
                progress.advance()
        else:
            for index in shards:
                shard_task(spec_d, requests.key, key, phase, index)
                progress.advance()
    return Manifest.from_dict(finish_results_task(spec_d, requests.key, key, health))


def run_stages(
    spec: RunSpec, *, from_stage: str | None = None, fail_on_warn: bool = False,
    parallel_shards: bool = False,
) -> dict[str, Any]:
    """Every stage of a contract run as tasks of the current flow run; returns the run's
    id, status, exit code and the store path of its report."""
    logger = get_run_logger()
    store = Store(spec.store_url)
    book = RunBook(spec, store, from_stage, logger)
    manifests, timings, stage = book.manifests, book.timings, book.stage
    spec_d = spec.to_dict()

    stage("cases", lambda: Manifest.from_dict(cases_task(spec_d)))
    stage("requests", lambda: Manifest.from_dict(
        requests_task(spec_d, quote(manifests["cases"].to_dict()))))
    stage("results", lambda: call_stage(spec, store, manifests["requests"], parallel_shards))
    if spec.mode in ("fuzz", "all"):
        stage("comparisons", lambda: Manifest.from_dict(
            comparisons_task(spec_d, _dicts(manifests))))
        stage("minimized", lambda: Manifest.from_dict(
            minimized_task(spec_d, _dicts(manifests))))
    outcome: dict[str, Any] = summary_task(spec_d, _dicts(manifests), timings, fail_on_warn)
    report_task(spec.store_url, outcome["report"], artifact_key(run_label(spec_d)))
    logger.info("run %s: %s (exit %s)", spec.run_id, outcome["status"], outcome["exit_code"])
    return {"run_id": spec.run_id, **outcome}


@flow(name="contract_run", flow_run_name=_contract_run_name, persist_result=False)
def contract_run(
    spec: dict[str, Any],
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    parallel_shards: bool = False,
) -> dict[str, Any]:
    """A contract run (`spec` is `RunSpec.to_dict()`); returns its outcome (run id, status,
    exit code, store path of the report)."""
    return run_stages(RunSpec.from_dict(spec), from_stage=from_stage,
                      fail_on_warn=fail_on_warn, parallel_shards=parallel_shards)


def warn_if_ephemeral() -> None:
    if not PREFECT_API_URL.value():
        print("decflow: PREFECT_API_URL is not set; Prefect starts a temporary server for this "
              "run (slow, and its history is lost at exit). Start one with "
              "`prefect server start` and set PREFECT_API_URL.", file=sys.stderr)


def run_contract_flow(
    spec: dict[str, Any],
    *,
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    task_runner: str = "thread",
    dask_address: str | None = None,
) -> dict[str, Any]:
    """What the CLI calls for `--prefect`: the flow with the chosen task runner; returns
    the stored report."""
    warn_if_ephemeral()
    runner = build_task_runner(task_runner, dask_address)
    configured = contract_run.with_options(task_runner=runner)
    # The flow runs inside this command's process, which reports its end itself; without
    # heartbeats a sync flow does not wait for the heartbeat thread at its end (≈1 s per
    # run, measured). Deployed runs keep Prefect's heartbeats.
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        outcome: dict[str, Any] = configured(
            spec=spec, from_stage=from_stage, fail_on_warn=fail_on_warn,
            parallel_shards=task_runner == "dask",
        )
    report: dict[str, Any] = Store(spec["store_url"]).read_json(outcome["report"])
    return report
