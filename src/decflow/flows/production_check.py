"""The `production_check` flow: a production-log check (drift, calibration, segments) as
the check's own pipeline (`CHECK`) through the generic stage loop, as a direct check runs
it through the driver: `records-plan` → `records`, one task per unit the store does not
hold → `aggregates` → `summary` → `report`, recorded under `runs/<run_id>/` like a
contract run (`running`, then its verdict; `failed` or `interrupted` when it stops; `check
--resume RUN` finishes it) and published as artifacts. With the Dask task runner each
worker reads only its units."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run

from decflow.data.records.units import SourcePlan
from decflow.errors import DecflowError
from decflow.flows.common import Verdict, decflow_run, finish, flow_result, retried_run_id
from decflow.flows.contract_run import decision_name, published_outcome
from decflow.flows.crash_by_heartbeat import watched_run
from decflow.flows.runners import build_task_runner
from decflow.flows.server import prefect_server
from decflow.flows.stage_loop import run_pipeline, stopped_message
from decflow.pipeline.production.run import resumed_check
from decflow.pipeline.production.stages import CheckSpec
from decflow.pipeline.production.summary import CHECK
from decflow.pipeline.stored.check_runs import RECORDS_BACKEND
from decflow.store.runs import has_run, new_run_id, read_run_record, report_path
from decflow.store.store import Store
from decflow.tasks.report import artifact_key
from decflow.tasks.stages import plan_task


def check_label(contract: str) -> str:
    return f"{decision_name(contract)}-check-records"


def _check_run_name() -> str:
    return check_label(flow_run.parameters["contract"])


def _planned(records: str) -> SourcePlan:
    """The plan of a check's records, made in a task (local files by absolute path)."""
    return SourcePlan.from_dict(plan_task(records))


@flow(name="production_check", flow_run_name=_check_run_name, persist_result=False)
def production_check(
    contract: str,
    records: str | None = None,
    baseline: str | None = None,
    store: str = ".decflow",
    fail_on_warn: bool = False,
    resume: str | None = None,
    from_stage: str | None = None,
) -> State[Any]:
    """Check production records (a file, folder or glob) against the contract and an
    optional baseline (records or an earlier check report), or finish the stored check run
    `resume` (`records`: where its records are now, if they moved); the report is stored
    as a run (`runs/<run_id>/report.json`). Returns the run id, status, exit code, headline
    and report path; a FAIL ends the flow run Failed (`GateFailed` for a Python caller)."""
    opened = Store(store)
    retried = retried_run_id()  # a retried flow run continues the same check
    if retried is not None and opened.exists(report_path(retried)):  # judged: as it is
        judged = CheckSpec.from_dict(read_run_record(opened, retried)["spec"])
        with decflow_run(retried, check_label(contract), stopped_message(CHECK, judged)):
            done = published_outcome(opened, retried, artifact_key(decision_name(contract),
                                                                   RECORDS_BACKEND, "check"))
            return finish(done, Verdict(done))
    resume = resume or (retried if retried is not None and has_run(opened, retried) else None)
    if resume is not None:
        spec = resumed_check(opened, resume, contract, records, plan=_planned)
    else:
        if records is None:
            raise DecflowError("production_check: give the records to check, or a check "
                               "run to resume")
        spec = CheckSpec(contract, records, opened.location, retried or new_run_id(),
                         _planned(records), baseline)
    with decflow_run(spec.run_id, check_label(contract), stopped_message(CHECK, spec)):
        outcome = run_pipeline(CHECK, spec, from_stage=from_stage, fail_on_warn=fail_on_warn)
        return finish(outcome, Verdict(outcome))


def run_production_check_flow(
    contract: str, records: str | None, baseline: str | None = None, *,
    store: str = ".decflow", fail_on_warn: bool = False, resume: str | None = None,
    from_stage: str | None = None, task_runner: str = "thread",
    dask_address: str | None = None,
) -> dict[str, Any]:
    """What `decflow check --prefect` calls: the flow with the chosen task runner,
    returning the report (a FAIL is the report's exit code 1, not a failed call)."""
    configured = production_check.with_options(
        task_runner=build_task_runner(task_runner, dask_address)
    )
    with prefect_server(), watched_run():
        state = configured(contract=contract, records=records, baseline=baseline, store=store,
                           fail_on_warn=fail_on_warn, resume=resume, from_stage=from_stage,
                           return_state=True)
    outcome: dict[str, Any] = flow_result(state)
    report: dict[str, Any] = Store(store).read_json(outcome["report"])
    return report
