"""The `production_check` flow: a production-log check (drift, calibration, segments) as
the stages `records-plan` → `records` mapped over the input's units → `aggregates` →
`summary` → `report`, through the store, stored under `runs/<run_id>/` like a contract run
and published as artifacts. With the Dask task runner each worker reads only its units."""

from __future__ import annotations

import os
from typing import Any, cast

from prefect import flow, get_run_logger, unmapped
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run

from decflow.flows.common import failure, finish, unwalked
from decflow.flows.contract_run import decision_name
from decflow.flows.crash_detection import watched_run
from decflow.flows.runners import build_task_runner
from decflow.store.runs import new_run_id
from decflow.store.store import Store
from decflow.tasks.production import aggregates_task, check_summary_task, plan_task, unit_task
from decflow.tasks.report import artifact_key, report_task


def _check_run_name() -> str:
    return f"{decision_name(flow_run.parameters['contract'])}-check-records"


@flow(name="production_check", flow_run_name=_check_run_name, persist_result=False)
def production_check(
    contract: str,
    records: str,
    baseline: str | None = None,
    store: str = ".decflow",
    fail_on_warn: bool = False,
    fail_flow_on_fail: bool = True,
) -> dict[str, Any] | State[Any]:
    """Check production records (a file, folder or glob) against the contract and an
    optional baseline (records or an earlier check report); the report is stored as a run
    (`runs/<run_id>/report.json`). Returns the run id, status, exit code, report path; a
    FAIL ends the flow run Failed (`GateFailed` for a Python caller) unless
    `fail_flow_on_fail` is off."""
    run_id = new_run_id()
    plan = plan_task(records)
    # Workers may run in another directory: they get absolute local paths.
    contract_file = contract if "://" in contract else os.path.abspath(contract)
    store = Store(store).location
    # one task per unit: with the Dask runner each worker reads only its own units
    futures = unit_task.map(unmapped(contract_file), unmapped(store), plan["units"])
    outcomes = [future.result() for future in futures]
    aggregates = aggregates_task(contract_file, store, unwalked(plan), unwalked(outcomes))
    outcome: dict[str, Any] = check_summary_task(
        contract, records, baseline, store, run_id, unwalked(aggregates), fail_on_warn,
    )
    label = f"{decision_name(contract)}-check-records"
    report_task(store, outcome["report"], artifact_key(label))
    get_run_logger().info("check %s: %s (exit %s)", run_id, outcome["status"],
                          outcome["exit_code"])
    result = {"run_id": run_id, **outcome}
    if not fail_flow_on_fail:
        return result
    return finish(result, failure(outcome, f"production check {run_id}"))


def run_production_check_flow(
    contract: str, records: str, baseline: str | None = None, *, store: str = ".decflow",
    fail_on_warn: bool = False, task_runner: str = "thread", dask_address: str | None = None,
) -> dict[str, Any]:
    """What `decflow check --prefect` calls: the flow with the chosen task runner,
    returning the report (a FAIL is the report's exit code 1, not a failed call)."""
    from decflow.flows.contract_run import warn_if_ephemeral

    warn_if_ephemeral()
    configured = production_check.with_options(
        task_runner=build_task_runner(task_runner, dask_address)
    )
    with watched_run():
        # fail_flow_on_fail=False: the flow returns its outcome, never a Failed state
        outcome = cast(dict[str, Any], configured(
            contract=contract, records=records, baseline=baseline, store=store,
            fail_on_warn=fail_on_warn, fail_flow_on_fail=False,
        ))
    report: dict[str, Any] = Store(store).read_json(outcome["report"])
    return report
