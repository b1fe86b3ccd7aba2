"""The `production_monitor` flow: a monitor run as the monitor's own pipeline (`MONITOR`)
through the generic stage loop, as `decflow monitor` runs it through the driver: under the
monitor's lock, `monitor-plan` (list the source and labels, plan what is new) →
`records`, one task per unit to read → `partitions` → `labels` → `monitor` (windows
judged, detector, report, state) → `report` (artifacts). An ALARM ends the flow run Failed
with the headline and emits the Prefect event `decflow.monitor.alarm`, which an
automation can notify on (deployments/README.md). A retried flow run is the same monitor
run: a finished one is published again as it is (no second event), an unfinished one
(its state unchanged: the state is written last) plans and runs again."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.events import emit_event
from prefect.runtime import flow_run

from decflow.flows.common import Verdict, decflow_run, finish, flow_result, retried_run_id
from decflow.flows.contract_run import decision_name, published_outcome
from decflow.flows.crash_by_heartbeat import watched_run
from decflow.flows.server import prefect_server
from decflow.flows.stage_loop import run_pipeline, stopped_message
from decflow.pipeline.monitor.run import MONITOR
from decflow.pipeline.monitor.spec import BACKEND, MonitorSpec, monitor_of
from decflow.report.monitor_report import MONITOR_KIND
from decflow.store.monitors import monitor_lock
from decflow.store.runs import new_run_id, read_run_record, report_path
from decflow.store.store import Store
from decflow.tasks.monitor import monitor_plan_task
from decflow.tasks.report import artifact_key
from decflow.views.stored import write_window_html

ALARM_EVENT = "decflow.monitor.alarm"


def monitor_label(contract: str) -> str:
    return f"{decision_name(contract)}-monitor"


def _monitor_run_name() -> str:
    return monitor_label(flow_run.parameters["contract"])


def emit_alarm(report: dict[str, Any]) -> None:
    """The event an automation notifies on: the monitor as its resource, the run and the
    windows that do not pass as related resources, the headline and report in the payload."""
    monitor, run = report["monitor"], report["run"]
    failing = [w["name"] for w in report["windows"] if w["status"] == "fail"]
    alarm = (report.get("harmful_shift") or {}).get("alarm")
    emit_event(
        event=ALARM_EVENT,
        resource={"prefect.resource.id": f"decflow.monitor.{monitor['id']}",
                  "prefect.resource.name": monitor["id"],
                  "decflow.decision": report["contract"]["name"]},
        related=[{"prefect.resource.id": f"decflow.run.{run['id']}",
                  "prefect.resource.role": "monitor-run"}],
        payload={"headline": report["headline"], "run_id": run["id"],
                 "store": run["store"], "report": f"runs/{run['id']}/report.json",
                 "since": None if not alarm else alarm.get("since"),
                 "failing_windows": failing, "source": monitor["source"]},
    )


@flow(name="production_monitor", flow_run_name=_monitor_run_name, persist_result=False)
def production_monitor(
    contract: str,
    records: str,
    labels: str | None = None,
    baseline: str | None = None,
    store: str = ".decflow",
) -> State[Any]:
    """Check what is new in `records` (a folder, glob or file of partitions) and `labels`
    for the contract's decision, window by window, against `baseline` (records, a check
    report, a check run or `accepted`; default: the monitor's own); the report is stored
    as a run (`runs/<run_id>/report.json`) and each window checked as a window run. An
    ALARM ends the flow run Failed and emits `decflow.monitor.alarm`."""
    opened = Store(store)
    retried = retried_run_id()  # a retried flow run is the same monitor run
    if retried is not None and opened.exists(report_path(retried)):  # finished: as it is
        judged = MonitorSpec.from_dict(read_run_record(opened, retried)["spec"])
        with decflow_run(retried, monitor_label(contract), stopped_message(MONITOR, judged)):
            done = published_outcome(opened, retried, artifact_key(
                decision_name(contract), BACKEND, MONITOR_KIND))
            return finish(done, Verdict(done))
    with monitor_lock(opened, monitor_of(contract, records)):
        # an unfinished attempt changed no state (the state is written last): plan again
        spec = MonitorSpec.from_dict(monitor_plan_task(contract, records, opened.location,
                                                       retried or new_run_id(), labels,
                                                       baseline))
        with decflow_run(spec.run_id, monitor_label(contract), stopped_message(MONITOR, spec)):
            outcome = run_pipeline(MONITOR, spec)
            report: dict[str, Any] = opened.read_json(outcome["report"])
            write_window_html(opened, report)
            if report["status"] == "fail":
                emit_alarm(report)
            return finish(outcome, Verdict(outcome))


def run_production_monitor_flow(
    contract: str, records: str, *, labels: str | None = None, baseline: str | None = None,
    store: str = ".decflow",
) -> dict[str, Any]:
    """What `decflow monitor --prefect` calls: the flow, returning the report (an ALARM is
    the report's exit code 1, not a failed call)."""
    with prefect_server(), watched_run():
        state = production_monitor(contract=contract, records=records, labels=labels,
                                   baseline=baseline, store=store, return_state=True)
    outcome: dict[str, Any] = flow_result(state)
    report: dict[str, Any] = Store(store).read_json(outcome["report"])
    return report
