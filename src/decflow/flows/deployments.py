"""Deployments built from `deployments/prefect.yaml`, the one place schedules live.

`build_deployments` turns each entry into `flow.to_deployment(...)` (no server needed, so
the definitions are testable offline); `serve_deployments` serves them all from one process
(`decflow serve`), with the project root as working directory like a worker's pull step.

Served deployments are named `<name>-served` (`SERVED_SUFFIX`): a deployment `decflow
deploy` registered for a worker keeps its own name, so serving never takes it over (a
served deployment is paused when its process stops, and points at that process's files).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from prefect import Flow, serve
from prefect.schedules import Cron, Schedule

from decflow.errors import DecflowError
from decflow.flows.contract_run import contract_run
from decflow.flows.crash_by_heartbeat import describe, ensure_crash_automation, watched_run
from decflow.flows.nightly_regression import nightly_regression
from decflow.flows.production_check import production_check
from decflow.flows.production_monitor import production_monitor
from decflow.flows.replay import replay
from decflow.tasks.heartbeat import HEARTBEAT_S, WATCHED_TAG

FLOWS: dict[str, Flow[Any, Any]] = {
    "contract_run": contract_run,
    "nightly_regression": nightly_regression,
    "production_check": production_check,
    "production_monitor": production_monitor,
    "replay": replay,
}
WORK_POOL = "decflow-process"
SERVED_SUFFIX = "-served"
HEARTBEAT_SETTING = "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"
DRIFT_TAG = "drift"


def load_definitions(path: str | Path) -> list[dict[str, Any]]:
    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DecflowError(f"{path}: cannot read the deployments file ({exc})") from None
    entries = (document or {}).get("deployments")
    if not isinstance(entries, list) or not entries:
        raise DecflowError(f"{path}: no 'deployments' list")
    return entries


def flow_of(entry: dict[str, Any]) -> Flow[Any, Any]:
    name = str(entry.get("entrypoint", "")).rsplit(":", 1)[-1]
    if name not in FLOWS:
        raise DecflowError(
            f"deployment '{entry.get('name')}': entrypoint '{entry.get('entrypoint')}' is not "
            f"one of decflow's flows ({', '.join(FLOWS)})"
        )
    return FLOWS[name]


def schedules_of(entry: dict[str, Any]) -> list[Schedule]:
    return [
        Cron(s["cron"], timezone=s.get("timezone", "UTC"), active=s.get("active", True))
        for s in entry.get("schedules") or []
    ]


def check_heartbeat(entry: dict[str, Any]) -> None:
    """A watched deployment must make its worker-run processes heartbeat as often as the
    crash automation expects, or the automation would mark its live runs Crashed."""
    if WATCHED_TAG not in (entry.get("tags") or []):
        return
    env = ((entry.get("work_pool") or {}).get("job_variables") or {}).get("env") or {}
    if str(env.get(HEARTBEAT_SETTING)) != str(HEARTBEAT_S):
        raise DecflowError(
            f"deployment '{entry.get('name')}': it is tagged {WATCHED_TAG}, so its "
            f"work_pool.job_variables.env must set {HEARTBEAT_SETTING}: \"{HEARTBEAT_S}\""
        )


def check_drift_baseline(entry: dict[str, Any]) -> None:
    """A drift check measures drift only against a baseline."""
    if DRIFT_TAG in (entry.get("tags") or []) and not (entry.get("parameters") or {}).get(
            "baseline"):
        raise DecflowError(
            f"deployment '{entry.get('name')}': it is tagged {DRIFT_TAG} but passes no "
            "baseline, so it would measure no drift; set parameters.baseline to earlier "
            "records or an earlier check's report.json"
        )


def check_names(entries: list[dict[str, Any]]) -> None:
    """Each deployment has its own name, and none ends in `SERVED_SUFFIX`: `decflow serve`
    adds it, so `nightly` served would take over a `nightly-served` that `decflow deploy`
    registered (or two entries of one name would register one deployment twice)."""
    seen: set[str] = set()
    for entry in entries:
        name = str(entry.get("name") or "")
        if name.endswith(SERVED_SUFFIX):
            raise DecflowError(f"deployment '{name}': names ending in '{SERVED_SUFFIX}' are "
                               "kept for what `decflow serve` registers; rename it")
        if name in seen:
            raise DecflowError(f"deployment '{name}' is defined twice; give each entry its "
                               "own name")
        seen.add(name)


def checked_definitions(path: str | Path) -> list[dict[str, Any]]:
    """The entries of the deployments file, each checked: its own name, a decflow flow,
    valid parameters, heartbeats as the crash automation expects, a baseline for drift
    checks."""
    entries = load_definitions(path)
    check_names(entries)
    for entry in entries:
        check_heartbeat(entry)
        check_drift_baseline(entry)
        flow_of(entry).validate_parameters(entry.get("parameters") or {})
    return entries


def build_deployments(path: str | Path, suffix: str = "") -> list[Any]:
    """A `RunnerDeployment` per entry of the deployments file, named `<name><suffix>`."""
    deployments = []
    for entry in checked_definitions(path):
        flow = flow_of(entry)
        deployments.append(flow.to_deployment(
            name=f"{entry['name']}{suffix}",
            description=entry.get("description"),
            tags=entry.get("tags") or [],
            parameters=entry.get("parameters") or {},
            schedules=schedules_of(entry),
        ))
    return deployments


def project_dir(path: str | Path) -> Path:
    """The project root: the folder holding `deployments/` (paths in parameters are
    relative to it)."""
    return Path(path).resolve().parent.parent


def serve_deployments(path: str | Path) -> None:
    """Serve every deployment of the file from this process until it is stopped. Its
    runs' processes inherit the heartbeat setting; deployments tagged `WATCHED_TAG` are
    watched by the crash automation, created here if needed."""
    path = Path(path).resolve()
    # runs resolve the parameters' relative paths (and the entrypoints) from here
    os.chdir(project_dir(path))
    deployments = build_deployments(path, SERVED_SUFFIX)  # never `decflow deploy`'s names
    print(f"decflow: {describe(ensure_crash_automation())}", file=sys.stderr)
    print("decflow: serving " + ", ".join(f"{d.flow_name}/{d.name}" for d in deployments),
          file=sys.stderr)
    with watched_run():
        serve(*deployments)
