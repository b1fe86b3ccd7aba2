"""The `production_check` flow: a production-log check (drift, calibration, segments) as
the check's own stages, through `run_stage` as a direct check runs them: `records-plan` →
`records`, one task per unit the store does not hold (`prefect_units`) → `aggregates` →
`summary` → `report`, stored under `runs/<run_id>/` like a contract run and published as
artifacts. With the Dask task runner each worker reads only its units."""

from __future__ import annotations

import os
import shlex
from typing import Any

from prefect import flow, unmapped
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run

from decflow.data.record_units import SourcePlan, Unit
from decflow.flows.common import (
    Verdict,
    decflow_run,
    finish,
    flow_result,
    retried_run_id,
    task_value,
    unwalked,
)
from decflow.flows.contract_run import decision_name, published_outcome
from decflow.flows.crash_detection import watched_run
from decflow.flows.crashes import absolute, crash_message
from decflow.flows.runners import build_task_runner
from decflow.flows.server import prefect_server
from decflow.pipeline.production.run import check_context
from decflow.pipeline.production.stages import AGGREGATES, CheckSpec
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import StageContext, UnitOutcome, UnitRunner, run_units
from decflow.store.runs import new_run_id, report_path
from decflow.store.store import Store
from decflow.tasks.production import aggregates_task, check_summary_task, plan_task, unit_task
from decflow.tasks.report import artifact_key, report_task


def prefect_units(contract: str, spec: dict[str, Any]) -> UnitRunner:
    """The flow's `UnitRunner`: one `records` task per unit to read (with the Dask runner
    each worker reads only its own units)."""

    def run(_context: StageContext[Any], missing: list[tuple[Unit, str]]) -> list[UnitOutcome]:
        futures = unit_task.map(unmapped(contract), unmapped(spec),
                                [unit.to_dict() for unit, _ in missing],
                                [key for _, key in missing])
        return [UnitOutcome.from_dict(future.result()) for future in futures]

    return run


def check_label(contract: str) -> str:
    return f"{decision_name(contract)}-check-records"


def _check_run_name() -> str:
    return check_label(flow_run.parameters["contract"])


def rerun_command(contract: str, records: str, baseline: str | None, store: str) -> str:
    """The command that runs the same check again (a check has nothing to resume)."""
    parts = ["decflow", "check", contract, "-d", records]
    if baseline:
        parts += ["--baseline", baseline]
    return " ".join(shlex.quote(p) for p in [*parts, "--store", store])


@flow(name="production_check", flow_run_name=_check_run_name, persist_result=False)
def production_check(
    contract: str,
    records: str,
    baseline: str | None = None,
    store: str = ".decflow",
    fail_on_warn: bool = False,
) -> State[Any]:
    """Check production records (a file, folder or glob) against the contract and an
    optional baseline (records or an earlier check report); the report is stored as a run
    (`runs/<run_id>/report.json`). Returns the run id, status, exit code, headline and
    report path; a FAIL ends the flow run Failed (`GateFailed` for a Python caller)."""
    run_id = retried_run_id() or new_run_id()  # a retried flow run: the same check
    again = rerun_command(absolute(contract), absolute(records),
                          baseline and absolute(baseline), absolute(store))
    crash = crash_message(f"check {run_id}", f"run it again with `{again}`")
    key = artifact_key(decision_name(contract), "records", "check")
    with decflow_run(run_id, check_label(contract), crash):
        opened = Store(store)
        if opened.exists(report_path(run_id)):  # judged by an earlier attempt: as it is
            done = published_outcome(opened, run_id, key)
            return finish(done, Verdict(done))
        plan = plan_task(records)
        # Workers may run in another directory: they get absolute local paths.
        contract_file = contract if "://" in contract else os.path.abspath(contract)
        spec = CheckSpec(contract, records, opened.location, run_id,
                         SourcePlan.from_dict(plan), baseline)
        # unmapped values are not unwrapped from `quote`: the unit tasks get the plain dict
        context = check_context(spec, opened, load_contract_cached(contract_file),
                                prefect_units(contract_file, spec.to_dict()))
        spec_d = unwalked(spec.to_dict())
        outcomes = [o.to_dict() for o in run_units(AGGREGATES, context)]
        aggregates = aggregates_task(contract_file, spec_d, unwalked(outcomes))
        outcome: dict[str, Any] = task_value(check_summary_task(
            contract_file, spec_d, unwalked(aggregates), fail_on_warn, return_state=True))
        report_task(opened.location, outcome["report"], key)
        result = {"run_id": run_id, **outcome}
        return finish(result, Verdict(result))


def run_production_check_flow(
    contract: str, records: str, baseline: str | None = None, *, store: str = ".decflow",
    fail_on_warn: bool = False, task_runner: str = "thread", dask_address: str | None = None,
) -> dict[str, Any]:
    """What `decflow check --prefect` calls: the flow with the chosen task runner,
    returning the report (a FAIL is the report's exit code 1, not a failed call)."""
    configured = production_check.with_options(
        task_runner=build_task_runner(task_runner, dask_address)
    )
    with prefect_server(), watched_run():
        state = configured(contract=contract, records=records, baseline=baseline, store=store,
                           fail_on_warn=fail_on_warn, return_state=True)
    outcome: dict[str, Any] = flow_result(state)
    report: dict[str, Any] = Store(store).read_json(outcome["report"])
    return report
