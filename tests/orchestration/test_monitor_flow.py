"""The hourly monitor deployment under `decflow serve` against a real Prefect server on
127.0.0.1: a run of the served `monitor-refund` deployment over generated partitions whose
newest day carries a planted confidence shift ends Failed with the monitor's ALARM
headline, stores its monitor and window runs, and its `decflow.monitor.alarm` event is in
the server's event feed, naming the monitor; retried from the UI it is the same monitor
run (re-published, no second alarm); a second run with nothing new reads nothing and
completes with the same verdict."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.orchestration.test_orchestration import (  # the module's server and helpers
    api_call,
    client_env,
    prefect_api,
)
from tests.support.paths import ROOT
from tests.support.refund_stream import write_stream

pytestmark = pytest.mark.orchestration
__all__ = ["prefect_api"]

RUN_TIMEOUT_S = 180


def _serve(project: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    document = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    document["deployments"] = [d for d in document["deployments"]
                               if d["name"] == "monitor-refund"]
    served = project / "deployments" / "prefect.yaml"  # served as `monitor-refund-served`
    served.parent.mkdir()
    served.write_text(yaml.safe_dump(document))
    log = (project / "serve.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "decflow", "serve", "--file", str(served)],
                            env=env, cwd=project, stdout=log, stderr=subprocess.STDOUT)


def _run_deployment(api: str, env: dict[str, str], project: Path,
                    server: subprocess.Popen[bytes]) -> Any:
    """Start a run of the served deployment now and wait for its final state."""
    async def deployment(client: Any) -> Any:
        found = [d for d in await client.read_deployments()
                 if d.name == "monitor-refund-served"]
        return found[0] if found else None

    deadline = time.monotonic() + 120
    while api_call(api, deployment) is None:
        assert server.poll() is None, (project / "serve.log").read_text()
        assert time.monotonic() < deadline, "decflow serve registered no deployment"
        time.sleep(1)
    started = subprocess.run(
        [sys.executable, "-m", "prefect", "deployment", "run",
         "production_monitor/monitor-refund-served", "--param", "store=store"],
        env=env, cwd=project, capture_output=True, text=True, timeout=120, check=False)
    assert started.returncode == 0, started.stderr
    flow_run_id = next(line.split()[-1] for line in started.stdout.splitlines()
                       if "UUID" in line)
    return _final(api, flow_run_id, project, server)


def _retried(api: str, flow_run: Any, project: Path, server: subprocess.Popen[bytes]) -> Any:
    """Retry a finished flow run as the UI's Retry does (set to Scheduled through the API)
    and wait for its final state."""
    from prefect.states import AwaitingRetry

    api_call(api, lambda c: c.set_flow_run_state(
        flow_run.id, AwaitingRetry(message="Retry from the UI"), force=True))
    return _final(api, flow_run.id, project, server)


def _final(api: str, flow_run_id: Any, project: Path,
           server: subprocess.Popen[bytes]) -> Any:
    """The flow run once the served deployment ran it to a final state."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        run = api_call(api, lambda c: c.read_flow_run(flow_run_id))
        if run.state.is_final():
            return run
        assert server.poll() is None, (project / "serve.log").read_text()
        assert time.monotonic() < deadline, f"the served run is still {run.state.type}"
        time.sleep(1)


def _alarm_events(api: str, monitor: str, runs: int) -> list[Any]:
    """The monitor's alarm events, once the server has ingested one for each of `runs`
    alarming runs (or a minute has passed: then what it has)."""
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    async def read(client: Any) -> list[Any]:
        page = await client.read_events(EventFilter(
            event=EventNameFilter(name=["decflow.monitor.alarm"]),
            resource=EventResourceFilter(id=[f"decflow.monitor.{monitor}"])), limit=50)
        return list(page.events)

    # the server ingests events in the background, each run's when it gets to it: waiting
    # for the first event alone missed the second run's (seen under load)
    deadline = time.monotonic() + 60
    while True:
        found: list[Any] = api_call(api, read)
        if len(found) >= runs or time.monotonic() > deadline:
            return found
        time.sleep(1)


def test_the_served_monitor_alarms_into_the_event_feed(
        prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    project = tmp_path
    shutil.copytree(ROOT / "contracts" / "refund-monitor",
                    project / "contracts" / "refund-monitor")
    write_stream(project / "examples" / "refund-stream", "--days", "2", "--per-hour", "5",
                 "--baseline-days", "1", "--partition", "day", "--confidence-shift-from", "1",
                 "--confidence-shift", "0.3")
    env = {**client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home")),
           "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    server = _serve(project, env)
    try:
        first = _run_deployment(prefect_api, env, project, server)
        retried = _retried(prefect_api, first, project, server)
        second = _run_deployment(prefect_api, env, project, server)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    runs = sorted(p.name for p in (project / "store" / "runs").iterdir())
    monitor_runs = [r for r in runs if "-w" not in r]
    assert len(monitor_runs) == 2
    report = json.loads((project / "store" / "runs" / monitor_runs[0] / "report.json")
                        .read_text())
    assert report["headline"].startswith("ALARM") and report["status"] == "fail"
    windows = {w["name"]: w for w in report["windows"]}
    assert windows["2026-11-02"]["gates"]["max_confidence_tv_distance"]["status"] == "fail"
    assert windows["2026-11-01"]["gates"]["max_confidence_tv_distance"]["status"] != "fail"
    assert first.state.is_failed() and first.state.message == report["headline"]
    assert f"run:{monitor_runs[0]}" in first.tags and "verdict:fail" in first.tags
    # retried, the flow run is the same monitor run: re-published, nothing checked again
    # (no other run, the cursor advanced once: the next run reads nothing), one verdict tag
    assert retried.id == first.id and retried.run_count == 2
    assert retried.state.is_failed() and retried.state.message == report["headline"]
    assert sorted(t for t in retried.tags if t.startswith(("verdict:", "run:"))) == [
        f"run:{monitor_runs[0]}", "verdict:fail"]
    assert {f"{monitor_runs[0]}-w20261101", f"{monitor_runs[0]}-w20261102"} <= set(runs)
    again = json.loads((project / "store" / "runs" / monitor_runs[1] / "report.json")
                       .read_text())
    assert again["this_run"]["bytes_read"] == 0 and again["headline"] == report["headline"]
    assert second.state.is_failed()
    events = _alarm_events(prefect_api, report["monitor"]["id"], len(monitor_runs))
    by_run = {e.payload["run_id"]: e for e in events}
    assert set(by_run) == set(monitor_runs)  # each alarming run emitted one event
    assert len(events) == len(monitor_runs)  # the retry pages no one again
    event = by_run[monitor_runs[0]]
    assert event.payload["headline"] == report["headline"]
    assert "2026-11-02" in event.payload["failing_windows"]
    assert event.resource["decflow.decision"] == "refund_request"
