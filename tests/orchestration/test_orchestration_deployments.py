"""Deployment definitions (deployments/prefect.yaml, the serve entrypoint) checked without a
Prefect server: schedules, parameters, entrypoints and the files they name."""

from __future__ import annotations

import os
import runpy
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.refund_stream import write_stream

pytestmark = pytest.mark.orchestration

DEPLOYMENTS = ROOT / "deployments" / "prefect.yaml"


@pytest.fixture(scope="module")
def built() -> dict[str, object]:
    from decflow.flows.deployments import build_deployments

    cwd = os.getcwd()
    os.chdir(ROOT)  # entrypoints are relative to the project root, as `prefect deploy` sees it
    try:
        return {d.name: d for d in build_deployments(DEPLOYMENTS)}
    finally:
        os.chdir(cwd)


def test_nightly_regression_drift_check_and_monitor_are_declared(
        built: dict[str, object]) -> None:
    assert set(built) == {"nightly-regression-refund", "drift-check-refund", "monitor-refund"}
    monitor = built["monitor-refund"]
    assert monitor.flow_name == "production_monitor"  # type: ignore[attr-defined]
    assert monitor.parameters == {  # type: ignore[attr-defined]
        "contract": "contracts/refund-monitor/decflow.yaml",
        "records": "examples/refund-stream/records", "labels": "examples/refund-stream/labels",
        "baseline": "examples/refund-stream/baseline", "store": ".decflow"}
    nightly, drift = built["nightly-regression-refund"], built["drift-check-refund"]
    assert nightly.flow_name == "nightly_regression"  # type: ignore[attr-defined]
    assert drift.flow_name == "production_check"  # type: ignore[attr-defined]
    assert nightly.parameters == {  # type: ignore[attr-defined]
        "contract": "contracts/refund/decflow.yaml", "backend": "default", "mode": "test",
        "store": ".decflow", "noise_reruns": 2,
    }
    # the refund decision with drift gates, on generated partitions
    assert drift.parameters["contract"] == "contracts/refund-monitor/decflow.yaml"  # type: ignore[attr-defined]
    assert drift.parameters["records"] == "examples/refund-drift/records"  # type: ignore[attr-defined]
    # a drift check measures drift against earlier records
    assert drift.parameters["baseline"] == "examples/refund-drift/baseline"  # type: ignore[attr-defined]


def test_schedules_fire_nightly_and_every_six_hours(built: dict[str, object]) -> None:
    from cronsim import CronSim

    start = datetime(2026, 11, 30, 10, 30, tzinfo=UTC)
    fires = {}
    for name, deployment in built.items():
        (schedule,) = deployment.schedules  # type: ignore[attr-defined]
        assert schedule.active
        assert schedule.schedule.timezone == "UTC"
        sim = CronSim(schedule.schedule.cron, start)
        fires[name] = [next(sim) for _ in range(3)]
    assert [t.hour for t in fires["nightly-regression-refund"]] == [2, 2, 2]
    assert [t.day for t in fires["nightly-regression-refund"]] == [1, 2, 3]
    assert [t.hour for t in fires["drift-check-refund"]] == [12, 18, 0]
    assert [t.hour for t in fires["monitor-refund"]] == [11, 12, 13]  # hourly


def test_entrypoints_resolve_to_the_flows(built: dict[str, object]) -> None:
    from prefect.flows import load_flow_from_entrypoint

    from decflow.flows.deployments import flow_of

    entries = {e["name"]: e for e in yaml.safe_load(DEPLOYMENTS.read_text())["deployments"]}
    for name, deployment in built.items():
        assert deployment.entrypoint == entries[name]["entrypoint"]  # type: ignore[attr-defined]
        path, _, function = entries[name]["entrypoint"].partition(":")
        loaded = load_flow_from_entrypoint(f"{ROOT / path}:{function}")
        assert loaded.name == flow_of(entries[name]).name == deployment.flow_name  # type: ignore[attr-defined]
        assert entries[name]["work_pool"]["name"] == "decflow-process"


def test_parameters_name_real_files_and_validate(tmp_path: Path) -> None:
    """Contracts are in the project; records under examples/ are what the commands of
    deployments/README.md generate."""
    from decflow.contracts import load_contract
    from decflow.flows.deployments import flow_of, load_definitions

    for line in (ROOT / "deployments" / "README.md").read_text().splitlines():
        if line.startswith("python scripts/refund_records.py examples/"):
            folder, *args = shlex.split(line)[2:]
            write_stream(tmp_path / folder, *args)
    for entry in load_definitions(DEPLOYMENTS):
        params = entry["parameters"]
        flow_of(entry).validate_parameters(params)
        assert load_contract(str(ROOT / params["contract"])).contract.decision.name == (
            "refund_request")
        for name in ("records", "labels", "baseline"):
            if name in params:
                generated = params[name].startswith("examples/")
                assert (tmp_path if generated else ROOT).joinpath(params[name]).exists()


def test_unknown_entrypoint_is_an_error(tmp_path: Path) -> None:
    from decflow.errors import DecflowError
    from decflow.flows.deployments import build_deployments

    bad = tmp_path / "prefect.yaml"
    bad.write_text(yaml.safe_dump({"deployments": [
        {"name": "x", "entrypoint": "flows.py:not_a_flow", "parameters": {}}]}))
    with pytest.raises(DecflowError, match="not_a_flow"):
        build_deployments(bad)


def test_a_drift_check_without_a_baseline_is_an_error(tmp_path: Path) -> None:
    from decflow.errors import DecflowError
    from decflow.flows.deployments import build_deployments, load_definitions

    (drift,) = [e for e in load_definitions(DEPLOYMENTS) if "drift" in e["tags"]]
    del drift["parameters"]["baseline"]
    bad = tmp_path / "prefect.yaml"
    bad.write_text(yaml.safe_dump({"deployments": [drift]}))
    with pytest.raises(DecflowError, match="tagged drift but passes no baseline"):
        build_deployments(bad)


@pytest.mark.parametrize(("names", "expected"), [
    (["nightly", "nightly-served"], "names ending in '-served' are kept for"),
    (["nightly", "nightly"], "'nightly' is defined twice"),
])
def test_names_serve_and_deploy_would_share_are_an_error(
        tmp_path: Path, names: list[str], expected: str) -> None:
    from decflow.errors import DecflowError
    from decflow.flows.deployments import build_deployments, load_definitions

    (nightly,) = [e for e in load_definitions(DEPLOYMENTS) if "nightly" in e["name"]]
    bad = tmp_path / "prefect.yaml"
    bad.write_text(yaml.safe_dump({"deployments": [{**nightly, "name": n} for n in names]}))
    with pytest.raises(DecflowError, match=expected):
        build_deployments(bad)


def test_serve_entrypoint_is_import_safe() -> None:
    namespace = runpy.run_path(str(ROOT / "deployments" / "serve.py"), run_name="not_main")
    assert callable(namespace["serve_deployments"])


def test_cli_needs_a_server_and_does_not_import_prefect_at_load() -> None:
    script = (
        "import sys\n"
        "from decflow.cli import _register\n"
        "_register()\n"
        "assert 'prefect' not in sys.modules, 'the CLI imported prefect'\n"
        "from decflow.cli import invoke\n"
        "sys.exit(invoke(['deploy', '--file', sys.argv[1]]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([sys.executable, "-c", script, str(DEPLOYMENTS)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "PREFECT_API_URL" in done.stderr


def test_nightly_regression_rejects_an_unknown_mode() -> None:
    from prefect.exceptions import ParameterTypeError

    from decflow.flows.nightly_regression import nightly_regression

    nightly_regression.validate_parameters({"contract": "c.yaml", "mode": "all"})
    with pytest.raises(ParameterTypeError):
        nightly_regression.validate_parameters({"contract": "c.yaml", "mode": "everything"})


def test_watched_deployments_heartbeat_as_often_as_the_crash_automation_expects(
    tmp_path: Path,
) -> None:
    from decflow.errors import DecflowError
    from decflow.flows.deployments import build_deployments, load_definitions
    from decflow.tasks.heartbeat import HEARTBEAT_S, WATCHED_TAG

    for entry in load_definitions(DEPLOYMENTS):
        assert WATCHED_TAG in entry["tags"], entry["name"]
        env = entry["work_pool"]["job_variables"]["env"]
        assert env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == str(HEARTBEAT_S)
    entry = load_definitions(DEPLOYMENTS)[0]
    del entry["work_pool"]["job_variables"]
    unwatched = tmp_path / "prefect.yaml"
    unwatched.write_text(yaml.safe_dump({"deployments": [entry]}))
    with pytest.raises(DecflowError, match="PREFECT_FLOWS_HEARTBEAT_FREQUENCY"):
        build_deployments(unwatched)


def test_crash_automations_watch_tagged_runs_and_tasks_for_missing_heartbeats() -> None:
    from datetime import timedelta
    from uuid import uuid4

    from prefect.client.schemas.objects import StateType
    from prefect.events.schemas.automations import Posture

    from decflow.errors import DecflowError
    from decflow.flows.crash_by_heartbeat import HOOKS, crash_automations
    from decflow.tasks.heartbeat import HEARTBEAT_S, MIN_WINDOW_S, TASK_HEARTBEAT, WATCHED_TAG

    hooks = {name: uuid4() for name in HOOKS}
    flows, tasks = crash_automations(90, hooks)
    finals = ("Completed", "Failed", "Cancelled", "Crashed")
    # a task run found Pending (it runs at once) is watched too
    for automation, kind, beat, waiting in (
            (flows, "flow-run", "prefect.flow-run.heartbeat", ()),
            (tasks, "task-run", TASK_HEARTBEAT, ("Pending",))):
        trigger = automation.trigger
        assert trigger.posture == Posture.Proactive  # type: ignore[union-attr]
        assert trigger.after == {beat, f"prefect.{kind}.Running",  # type: ignore[union-attr]
                                 *(f"prefect.{kind}.{w}" for w in waiting)}
        assert trigger.expect == {beat, *(f"prefect.{kind}.{state}" for state in finals),  # type: ignore[union-attr]
                                  *(f"prefect.{kind}.Running" for _ in waiting)}
        assert trigger.for_each == {"prefect.resource.id"}  # type: ignore[union-attr]
        assert trigger.within == timedelta(seconds=90)  # type: ignore[union-attr]
        assert trigger.match_related.root["prefect.resource.id"] == (  # type: ignore[union-attr]
            f"prefect.tag.{WATCHED_TAG}")
    crash, log, progress = flows.actions
    assert crash.state == StateType.CRASHED  # type: ignore[union-attr]
    assert {log.block_document_id, progress.block_document_id} == {  # type: ignore[union-attr]
        hooks["decflow-crash-logs"], hooks["decflow-crash-artifacts"]}
    (event,) = tasks.actions
    assert event.block_document_id == hooks["decflow-crash-events"]  # type: ignore[union-attr]
    assert HEARTBEAT_S == 30 and MIN_WINDOW_S > HEARTBEAT_S
    with pytest.raises(DecflowError, match="at least"):
        crash_automations(HEARTBEAT_S, hooks)


def test_the_crash_webhooks_render_what_the_server_accepts() -> None:
    """Rendered as the server renders them (its Jinja sandbox), the webhooks' bodies are a
    task run's Crashed event, a log line naming the resume command and a final progress
    artifact, each valid for the API endpoint it is sent to."""
    import json
    from datetime import datetime
    from types import SimpleNamespace
    from uuid import uuid4

    from prefect.server.events.schemas.events import Event
    from prefect.server.schemas.actions import ArtifactCreate, LogCreate
    from prefect.server.services.task_run_recorder import task_run_from_event
    from prefect.server.utilities.user_templates import render_user_template_sync

    from decflow.flows.crash_by_heartbeat import HOOKS, crash_automations

    flows, tasks = crash_automations(40, {name: uuid4() for name in HOOKS})
    resume = "decflow run r1: its process died …; resume it with `decflow test /c.yaml …`"
    flow_run = SimpleNamespace(id=uuid4(), labels={
        "decflow.crash": resume, "decflow.progress.share": 37.5,
        "decflow.progress.line": "results: 225/600 calls"})
    firing = SimpleNamespace(id=uuid4(), triggered=datetime.now(UTC))
    task_id = uuid4()
    running = Event(
        occurred=datetime.now(UTC), event="decflow.task-run.heartbeat", id=uuid4(),
        resource={"prefect.resource.id": f"prefect.task-run.{task_id}",
                  "prefect.resource.name": "results: call backend (originals, shard 1/2)"},
        related=[{"prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                  "prefect.resource.role": "flow-run"}],
        payload={"task_run": {"name": "results: call backend (originals, shard 1/2)",
                              "task_key": "k", "dynamic_key": "0", "tags": [], "labels": {},
                              "task_inputs": {}, "run_count": 1, "flow_run_run_count": 1}})
    context = {"firing": firing, "event": running, "flow_run": flow_run}

    def rendered(action: object) -> object:
        return json.loads(render_user_template_sync(action.payload, context))  # type: ignore[attr-defined]

    (crashed,) = rendered(tasks.actions[0])  # type: ignore[misc]
    task_run = task_run_from_event(Event.model_validate(crashed).receive())
    assert task_run.id == task_id and task_run.flow_run_id == flow_run.id
    assert task_run.state.type.value == "CRASHED" and task_run.end_time == firing.triggered
    assert task_run.state.message.startswith("No heartbeat for 40 s: ")
    (line,) = rendered(flows.actions[1])  # type: ignore[misc]
    log = LogCreate.model_validate(line)
    assert log.level == 40 and log.flow_run_id == flow_run.id
    assert log.message == f"No heartbeat for 40 s: {resume}"
    artifact = ArtifactCreate.model_validate(rendered(flows.actions[2]))
    assert artifact.type == "progress" and artifact.data == 37.5
    assert artifact.flow_run_id == flow_run.id
    assert artifact.description == (
        f"stopped at results: 225/600 calls: No heartbeat for 40 s: {resume}")


def test_the_no_baseline_note_suggests_accepting_only_a_passing_run() -> None:
    from decflow.flows.nightly_regression import baseline_advice, no_baseline_note

    passed = {"run_id": "r-pass", "status": "pass"}
    advice = baseline_advice(passed, "c.yaml", "default", "store")
    assert "`decflow runs accept r-pass --store store`" in advice
    note = no_baseline_note("refund_request", "default", passed, advice, "store")
    assert "`r-pass` (PASS) was not diffed" in note
    for status in ("fail", "warn"):
        run = {"run_id": "r-bad", "status": status}
        advice = baseline_advice(run, "c.yaml", "default", "store")
        assert "r-bad" not in advice
        assert f"it is {status.upper()}, so it should not become the baseline" in advice
        assert "accept a run that passes with `decflow runs accept RUN_ID --store store`" \
            in advice


def test_crash_after_says_and_enforces_its_minimum() -> None:
    from decflow.tasks.heartbeat import MIN_WINDOW_S
    from tests.support.cli import run_cli

    code, out, _ = run_cli("prefect-setup", "--help")
    assert code == 0 and f"at least {MIN_WINDOW_S}" in " ".join(out.split())
    code, _, err = run_cli("prefect-setup", "--crash-after", str(MIN_WINDOW_S - 1))
    assert code == 2 and f"greater than or equal to {MIN_WINDOW_S}" in err


def test_a_nightly_names_a_baseline_of_another_mode(tmp_path: Path) -> None:
    import shutil

    from decflow import sdk
    from decflow.flows.nightly_regression import mode_note, not_diffed
    from decflow.store.store import Store
    from tests.support.paths import ROOT

    shutil.copytree(ROOT / "contracts" / "refund", tmp_path / "refund")
    store = str(tmp_path / "store")
    baseline = sdk.run_test(str(tmp_path / "refund" / "decflow.yaml"), store=store)
    run_id = baseline["run"]["id"]
    assert mode_note(Store(store), run_id, "test") == ""
    assert mode_note(Store(store), run_id, "all") == " (baseline mode test, nightly mode all)"
    assert not_diffed("refund_request", "default") == (
        "WARN (not diffed: no accepted baseline for refund_request/default; accept one with "
        "decflow runs accept RUN)")
