"""Prefect orchestration against a real `prefect server start` on 127.0.0.1.

One server for the whole module (SQLite under a temporary PREFECT_HOME); few flow runs.
Each run goes through the CLI in a subprocess with PREFECT_API_URL set, and what Prefect
recorded (flow run, task runs, logs, artifacts) is read back through its client API.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_artifact_views import diff_identity_items, rendered, text_of
from tests.support import compare
from tests.support.paths import ROOT

pytestmark = pytest.mark.orchestration

REFUND = ROOT / "contracts" / "refund"
SERVER_START_TIMEOUT_S = 120
INGEST_TIMEOUT_S = 60
RUN_KEYED_STAGES = ("results", "comparisons", "minimized", "summary")
# The refund example's 11 cases pass DecGuard's point gates without showing them (exact
# one-sided 95 % lower bounds: 10 of 10 labeled right, 8 of 11 covered).
REFUND_UNDERPOWERED = ("underpowered: min_accuracy lower bound 0.7411, min_coverage lower "
                       "bound 0.4356")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("prefect-server-home")
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = (home / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not healthy(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prefect server did not start: {(home / 'server.log')}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def client_env(api: str, home: Path) -> dict[str, str]:
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_HOME": str(home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("DECFLOW_STORE", None)
    return env


def decflow(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "decflow", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)


def normalized(report: dict[str, Any]) -> dict[str, Any]:
    return compare.normalized(report, RUN_KEYED_STAGES)


def api_call(api: str, fn: Any) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def run() -> Any:
        async with get_client() as client:
            return await fn(client)

    with temporary_settings({PREFECT_API_URL: api}):
        return asyncio.run(run())


def flow_run_of(api: str, run_id: str) -> Any:
    async def find(client: Any) -> Any:
        runs = await client.read_flow_runs()
        return [r for r in runs if (r.parameters.get("spec") or {}).get("run_id") == run_id]

    matches = api_call(api, find)
    assert len(matches) >= 1, f"no flow run for run {run_id}"
    return matches[-1]


def recorded(api: str, flow_run_id: Any, expected_tasks: int) -> dict[str, Any]:
    """Task runs, artifacts and logs of a flow run (the server ingests events after the
    flow ends, so wait until the expected task runs are there)."""
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    async def read(client: Any) -> dict[str, Any]:
        runs = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        return {
            "flow_run": await client.read_flow_run(flow_run_id),
            "tasks": await client.read_task_runs(flow_run_filter=runs),
            "artifacts": await client.read_artifacts(artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))),
            "logs": await client.read_logs(LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))),
        }

    deadline = time.monotonic() + INGEST_TIMEOUT_S
    while True:
        seen = api_call(api, read)
        done = [t for t in seen["tasks"] if t.state and t.state.is_final()]
        if len(done) >= expected_tasks or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)


# Task runs are named `<stage>: <what it does>`; the call stage's steps share the stage.
RESULTS_STEPS = {
    "results: call backend (": "results-shard",
    "results: check the backend's health": "results-health",
    "results: check that some originals were answered": "results-check-originals",
    "results: publish the answers": "results",
}


def base_name(task_run: Any) -> str:
    """The task a task run ran, from its name (`cases: read the golden dataset` → cases)."""
    name: str = task_run.name
    for start, step in RESULTS_STEPS.items():
        if name.startswith(start):
            return step
    return name.split(": ", 1)[0]


def tagged(api: str, run_id: str) -> list[Any]:
    """The flow runs of decflow run `run_id` (tag `run:<id>`), oldest first."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    async def find(client: Any) -> list[Any]:
        return list(await client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[f"run:{run_id}"]))))

    return sorted(api_call(api, find), key=lambda r: r.created)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory with a copy of the refund example."""
    shutil.copytree(REFUND, tmp_path / "refund")
    return tmp_path


def test_contract_run_flow_matches_direct_run_and_is_recorded(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from decflow.gates.headline import failing_first
    from decflow.views.artifacts import report_artifact
    from decflow.views.html import render_html

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    contract = "refund/decflow.yaml"
    direct = decflow(env, project, "test", contract, "--all", "--no-prefect", "--store",
                     "store", "-o", "direct.json")
    assert direct.returncode == 0, direct.stderr
    flowed = decflow(env, project, "test", contract, "--all", "--prefect", "--store", "store",
                     "-o", "flow.json")
    assert flowed.returncode == 0, flowed.stderr
    report = json.loads((project / "flow.json").read_text())
    assert normalized(report) == normalized(json.loads((project / "direct.json").read_text()))
    run_id = report["run"]["id"]
    stored = json.loads((project / "store" / "runs" / run_id / "report.json").read_text())
    assert stored == report

    flow_run = flow_run_of(prefect_api, run_id)
    assert flow_run.name == f"refund_request-all-default-{run_id}"
    assert [r.id for r in tagged(prefect_api, run_id)] == [flow_run.id]
    assert flow_run.parameters["spec"]["mode"] == "all"
    shards = 2  # one shard of originals and one of transformed cases at the default size
    stages = {"cases", "requests", "results-health", "results-shard",
              "results-check-originals", "results", "comparisons", "minimized", "summary",
              "report"}
    seen = recorded(prefect_api, flow_run.id, len(stages) - 1 + shards)
    assert seen["flow_run"].state.is_completed()
    # the headline first, then what qualifies it
    assert seen["flow_run"].state.message == report["headline"] + (
        "\nNOT EXERCISED (n/a, not a pass): paraphrase")
    assert report["headline"] == f"PASS ({REFUND_UNDERPOWERED}): 18/18 gates hold"
    assert {"decflow", "decflow-heartbeat", f"run:{run_id}", "verdict:pass"} <= set(
        seen["flow_run"].tags)
    tasks = seen["tasks"]
    assert {base_name(t) for t in tasks} == stages
    # named after the stage and what the run does, no random suffix
    assert {t.name for t in tasks if base_name(t) == "results-shard"} == {
        "results: call backend (originals, shard 1/1)",
        "results: call backend (transformed, shard 1/1)"}
    assert all(re.fullmatch(r"[a-z-]+: [a-z][^:]*", t.name) for t in tasks), [
        t.name for t in tasks]
    assert len(tasks) <= 20 + shards
    assert sum(base_name(t) == "results-shard" for t in tasks) == shards
    assert all(t.state.is_completed() for t in tasks)

    by_type: dict[str, list[Any]] = {}
    for artifact in seen["artifacts"]:
        by_type.setdefault(artifact.type, []).append(artifact)
    # a local store is named by its path (no file:// anywhere): the HTML report's link
    # artifact too, the JSON's none
    assert set(by_type) == {"markdown", "table", "progress"}
    assert not any("file:" in str(a.data) for a in seen["artifacts"])
    run_dir = (project / "store" / "runs" / run_id).resolve()
    (markdown, link) = sorted(by_type["markdown"], key=lambda a: a.key)
    assert markdown.key == "cli-refund-request-default-all"  # a run started by hand
    assert markdown.description == report["headline"]
    assert link.key == "cli-refund-request-default-all-html"
    assert link.data == f"[report.html: {run_dir / 'report.html'}]({run_dir / 'report.html'})"
    locations = {name: str(run_dir / name) for name in ("report.json", "report.html")}
    assert markdown.data == report_artifact(report, locations)
    html = rendered(markdown.data)
    for name in ("report.json", "report.html"):
        assert f"<li>{name}: {run_dir / name}</li>" in html.split("<h2>Stored</h2>", 1)[1]
    assert (run_dir / "report.html").read_text() == render_html(report)
    hold = sum(c["status"] == "pass" for c in report["checks"])
    checks = html.split(f"<h2>Gates: {hold} of {len(report['checks'])} hold</h2>", 1)[1]
    body = checks.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    assert body.count("<tr>") == len(report["checks"])
    (table,) = by_type["table"]
    assert table.key == "cli-refund-request-default-all-checks"
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert len(rows) == len(report["checks"])
    for row, check in zip(rows, failing_first(report["checks"]), strict=True):
        cells = {column: rendered(str(text)) for column, text in row.items()}
        assert not any("<blockquote>" in cell for cell in cells.values()), row
        shown = {column: text_of(cell) for column, cell in cells.items()}
        assert shown["gate"].startswith(check["gate"])
        assert shown["comparison"] in ("at least", "at most", "below")
        assert shown["message"] == check["message"]
        # the message prints the value as the table should: "<metric> <value> …"
        expected = "n/a" if check["value"] is None else check["message"].split()[1]
        assert shown["value"] == expected, (row, check)
    (progress,) = by_type["progress"]
    assert progress.data == pytest.approx(100.0)
    requests = report["run"]["artifacts"]["requests"]["rows"]
    assert progress.description.startswith(f"results: {requests}/{requests} calls (100%) · ")

    # resuming the finished run through the flow (PREFECT_API_URL alone selects it) leaves
    # it as it is: a new run names it as its parent and reuses its stages, logged as such
    resumed = decflow(env, project, "test", contract, "--all", "--store", "store",
                      "--resume", run_id, "-o", "resumed.json")
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads((project / "resumed.json").read_text())
    child = again["run"]["id"]
    assert child != run_id
    assert normalized(again) == normalized(report)
    assert again["run"]["artifacts"]["results"] == report["run"]["artifacts"]["results"]
    (rerun,) = [r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                if (r.parameters.get("spec") or {}).get("run_id") == child]
    assert rerun.parameters["spec"]["parent"] == run_id
    logs = [entry.message for entry in recorded(prefect_api, rerun.id, 4)["logs"]]
    for stage in ("cases", "requests", "results"):
        assert any(f"stage {stage}: reused from run {run_id}" in m for m in logs), (stage, logs)
    tasks = recorded(prefect_api, rerun.id, 4)["tasks"]
    assert "results-shard" not in {base_name(t) for t in tasks}  # nothing re-sent

    # --from-stage recomputes from a stage on the run's stored upstream artifacts
    regated = decflow(env, project, "test", contract, "--all", "--prefect", "--store", "store",
                      "--resume", run_id, "--from-stage", "comparisons", "-o", "from.json")
    assert regated.returncode == 0, regated.stderr
    assert normalized(json.loads((project / "from.json").read_text())) == normalized(report)
    third = max((r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                 if (r.parameters.get("spec") or {}).get("parent") == run_id),
                key=lambda r: r.created)
    assert third.parameters["from_stage"] == "comparisons"
    seen = recorded(prefect_api, third.id, 4)
    assert {base_name(t) for t in seen["tasks"]} == {"comparisons", "minimized", "summary",
                                                      "report"}
    logs = [entry.message for entry in seen["logs"]]
    for stage in ("cases", "requests", "results"):
        assert any(f"stage {stage}: reused from run {run_id}" in m for m in logs), (stage, logs)


FAILING = "FAIL 2/18: max_ece 0.1751 > 0.15; option_order.max_violation_rate 0.8182 > 0"


def test_a_failing_run_ends_failed_naming_the_failing_gates_in_every_view(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The on-call view: the flow run of a FAILing `test --prefect` is Failed, and its state
    message, a WARNING log line, the artifacts' descriptions and first lines, and the first
    line of the text, Markdown, HTML, JSON and JUnit views all name the failing gates."""
    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    done = decflow(env, project, "test", "refund/decflow.yaml", "--all", "-b",
                   "order_sensitive", "--prefect", "--store", "store", "-o", "r.json",
                   "--markdown", "r.md", "--html", "r.html", "--junit", "r.xml")
    assert done.returncode == 1, done.stderr  # the exit code of a FAIL, as without Prefect
    report = json.loads((project / "r.json").read_text())
    assert report["headline"] == FAILING
    run_id = report["run"]["id"]
    (flow_run,) = tagged(prefect_api, run_id)
    seen = recorded(prefect_api, flow_run.id, 11)
    state = seen["flow_run"].state
    assert state.is_failed() and state.message.splitlines()[0] == FAILING
    tags = seen["flow_run"].tags
    assert {"decflow", f"run:{run_id}", "verdict:fail"} <= set(tags)
    assert sum(t.startswith(("verdict:", "run:")) for t in tags) == 2
    # the stage that judged the gates is red, with the headline; the others green
    (judged,) = [t for t in seen["tasks"] if not t.state.is_completed()]
    assert judged.name == "summary: judge the gates, write the report"
    assert judged.state.is_failed() and judged.state.message == FAILING
    warnings = [entry.message for entry in seen["logs"] if entry.level == 30]
    assert warnings == [FAILING]
    artifacts = {a.key: a for a in seen["artifacts"]}
    key = "cli-refund-request-order-sensitive-all"
    markdown, table = artifacts[key], artifacts[f"{key}-checks"]
    assert markdown.description == table.description == FAILING
    escaped = FAILING.replace("_", "\\_").replace(">", "&gt;")
    # the artifact leads with the failing gates; the description carries the headline
    assert markdown.data.startswith("# decflow all: refund\\_request (choice)\n")
    assert escaped not in markdown.data
    assert "### FAIL option\\_order.max\\_violation\\_rate 0.8182 &gt; 0" in markdown.data
    assert (project / "r.md").read_text().splitlines()[0] == f"**{escaped}**"
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [r["status"] for r in rows[:2]] == ["FAIL", "FAIL"]  # failing gates first
    assert done.stdout.splitlines()[0] == FAILING
    html = (project / "r.html").read_text()
    assert f'<p class="headline">{FAILING.replace(">", "&gt;")}</p>' in html
    assert f'name="message" value="{FAILING.replace(">", "&gt;")}"' in (
        project / "r.xml").read_text()

    # a production check too (the same flow as the drift-check deployment)
    checked = decflow(env, project, "check", "refund/decflow.yaml", "-d",
                      "refund/production-drift.jsonl", "--baseline", "refund/production.jsonl",
                      "--store", "store", "-o", "check.json")
    assert checked.returncode == 1, checked.stderr
    check = json.loads((project / "check.json").read_text())
    assert check["headline"].startswith("FAIL 4/6: min_accuracy 0 < 0.9; max_ece 0.975 > 0.25")
    (check_run,) = tagged(prefect_api, check["run"]["id"])
    assert check_run.state.is_failed()
    assert check_run.state.message.splitlines()[0] == check["headline"]
    assert "verdict:fail" in check_run.tags
    (judged,) = [t for t in task_runs_of(prefect_api, check_run.id) if t.state.is_failed()]
    assert judged.name.startswith("summary: ") and judged.state.message == check["headline"]


def test_a_warn_run_completes_tagged_also_under_fail_on_warn(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import yaml

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    document = yaml.safe_load((project / "refund" / "decflow.yaml").read_text())
    document["warnings"]["max_ece"] = document["requirements"].pop("max_ece")
    (project / "refund" / "warn.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    done = decflow(env, project, "test", "refund/warn.yaml", "-b", "order_sensitive",
                   "--fail-on-warn", "--prefect", "--store", "store", "-o", "warn.json")
    assert done.returncode == 1, done.stderr  # --fail-on-warn: the exit code only
    report = json.loads((project / "warn.json").read_text())
    assert report["status"] == "warn"
    assert report["headline"] == (
        "WARN 1/5 (underpowered: min_accuracy lower bound 0.7411, min_coverage lower bound "
        "0.2712): max_ece 0.1751 > 0.15 (warning)")
    (flow_run,) = tagged(prefect_api, report["run"]["id"])
    seen = recorded(prefect_api, flow_run.id, 8)
    assert seen["flow_run"].state.is_completed()
    assert seen["flow_run"].state.message == report["headline"]
    assert "verdict:warn" in seen["flow_run"].tags
    assert [e.message for e in seen["logs"] if e.level == 30] == [report["headline"]]


def test_production_check_flow(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from decflow.views.html import render_html

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    # PREFECT_API_URL is set: `decflow check` runs as the production_check flow
    flowed = decflow(env, project, "check", "refund/decflow.yaml", "-d",
                     "refund/production.jsonl", "--store", "store", "-o", "flow-check.json")
    assert flowed.returncode == 0, flowed.stderr
    direct = decflow(env, project, "check", "refund/decflow.yaml", "-d",
                     "refund/production.jsonl", "--store", "direct-store", "-o",
                     "direct-check.json", "--no-prefect")
    assert direct.returncode == 0, direct.stderr
    report = json.loads((project / "flow-check.json").read_text())
    other = json.loads((project / "direct-check.json").read_text())
    report.pop("created_at")
    other.pop("created_at")
    # both are stored as runs, each in its own store
    assert report.pop("run")["store"].endswith("/store")
    assert other.pop("run")["store"].endswith("/direct-store")
    assert report == other

    async def find(client: Any) -> list[Any]:
        return [r for r in await client.read_flow_runs()
                if r.parameters.get("records") == "refund/production.jsonl"]

    (flow_run,) = api_call(prefect_api, find)
    (run_dir,) = list((project / "store" / "runs").iterdir())
    assert flow_run.name == f"refund_request-check-records-{run_dir.name}"
    seen = recorded(prefect_api, flow_run.id, 5)
    assert seen["flow_run"].state.is_completed()
    assert f"run:{run_dir.name}" in seen["flow_run"].tags
    assert {base_name(t) for t in seen["tasks"]} == {"records-plan", "records", "aggregates",
                                                      "summary", "report"}
    assert "records: read unit 1 (4 records)" in {t.name for t in seen["tasks"]}
    keys = {a.key for a in seen["artifacts"] if a.type != "progress"}
    assert keys == {"cli-refund-request-records-check", "cli-refund-request-records-check-checks",
                    "cli-refund-request-records-check-html"}  # a local store: the HTML path
    assert json.loads((run_dir / "run.json").read_text())["mode"] == "check"
    assert json.loads((run_dir / "report.json").read_text())["status"] == report["status"]
    for store in ("store", "direct-store"):  # the HTML view beside it, however it ran
        (stored,) = list((project / store / "runs").iterdir())
        assert (stored / "report.html").read_text() == render_html(
            json.loads((stored / "report.json").read_text()))


def test_dask_two_workers_give_the_thread_runners_report(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import distributed  # the Dask extra is part of the test install

    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec
    from decflow.store.runs import new_run_id
    from decflow.store.store import Store

    home = tmp_path_factory.mktemp("prefect-client-home")
    env = client_env(prefect_api, home)
    for name in ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        monkeypatch.setenv(name, env[name])  # the spawned Dask workers inherit these
    monkeypatch.chdir(project)
    contract = str(project / "refund" / "decflow.yaml")
    # small shards, so the call stage fans out over both workers
    spec = RunSpec(contract_path=contract, store_url=str(project / "store"),
                   run_id=new_run_id(), mode="all", shard_size=8)
    direct = run_contract(spec, Store(spec.store_url))
    flow_spec = RunSpec(**{**spec.to_dict(), "run_id": new_run_id(), "properties": None})
    script = (
        "import json, sys\n"
        "from decflow.flows.contract_run import run_contract_flow\n"
        "spec, address = json.loads(sys.argv[1]), sys.argv[2]\n"
        "report = run_contract_flow(spec, task_runner='dask', dask_address=address)\n"
        "json.dump(report, open('dask.json', 'w'))\n"
    )
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        done = subprocess.run(
            [sys.executable, "-c", script, json.dumps(flow_spec.to_dict()),
             cluster.scheduler_address],
            env=env, cwd=project, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        ran_tasks = client.run(lambda: "decflow.tasks.stages" in sys.modules)
    assert len(ran_tasks) == 2 and any(ran_tasks.values())
    report = json.loads((project / "dask.json").read_text())
    assert normalized(report) == normalized(direct)
    seen = recorded(prefect_api, flow_run_of(prefect_api, flow_spec.run_id).id, 8)
    shards = [t for t in seen["tasks"] if base_name(t) == "results-shard"]
    assert len(shards) > 2 and all(t.state.is_completed() for t in shards)


def _partitioned_records(folder: Path, n_files: int, per_file: int) -> None:
    """Refund records with random distributions in `n_files` JSONL files (distinct ids)."""
    import numpy as np

    rng = np.random.default_rng(5)
    folder.mkdir()
    labels = ("refund", "reject", "review")
    for f in range(n_files):
        lines = []
        for i in range(per_file):
            raw = rng.random(3) ** 3
            probs = raw / raw.sum()
            top = labels[int(np.argmax(probs))]
            lines.append(json.dumps({
                "id": f"f{f}-{i}", "decision": "refund_request",
                "probabilities": dict(zip(labels, probs.tolist(), strict=True)),
                "selected": top, "outcome": labels[int(rng.integers(0, 3))],
                "latency_ms": float(rng.random() * 300), "metadata": {"locale": "en"},
            }))
        (folder / f"part-{f}.jsonl").write_text("\n".join(lines) + "\n")


def stage_manifests(store: Path, stage: str) -> dict[str, dict[str, Any]]:
    """key -> manifest of every published artifact of `stage` in a store."""
    return {path.parent.name: json.loads(path.read_text())
            for path in (store / "stages" / stage).glob("*/_manifest.json")}


def test_check_runs_one_stage_path_in_every_runner(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The production check has one code path: a direct check, the flow on threads, the
    flow on two Dask workers (one records task per unit) and a baseline computed for
    another check publish the same units and aggregates under the same keys, with the same
    statistics; checking unchanged input again reads nothing in either runner. A duplicate
    id across partitions is exit 2."""
    import distributed

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    for name in ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        monkeypatch.setenv(name, env[name])
    _partitioned_records(project / "logs", 4, 200)
    args = ("check", "refund/decflow.yaml", "-d", "logs", "-f", "json")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        address = cluster.scheduler_address
        fanned = decflow(env, project, *args, "--store", "store", "-o", "dask.json",
                         "--task-runner", "dask", "--dask-address", address)
        assert fanned.returncode in (0, 1), fanned.stderr
        ran = client.run(lambda: "decflow.pipeline.production.summary" in sys.modules)
        original = (project / "logs" / "part-3.jsonl").read_text()
        (project / "logs" / "part-3.jsonl").write_text(
            (project / "logs" / "part-1.jsonl").read_text().splitlines()[7] + "\n")
        duplicate = decflow(env, project, *args, "--store", "dup-store", "--task-runner",
                            "dask", "--dask-address", address)
    assert len(ran) == 2 and all(ran.values())  # both workers ran record units
    assert duplicate.returncode == 2
    assert "part-3.jsonl: line 1: duplicate record id 'f1-7' (first at line 8 of" in \
        duplicate.stderr
    (project / "logs" / "part-3.jsonl").write_text(original)
    threads = decflow(env, project, *args, "--store", "thread-store", "-o", "threads.json")
    single = decflow(env, project, *args, "--no-prefect", "--store", "direct-store",
                     "-o", "single.json")
    assert single.returncode == threads.returncode == fanned.returncode, single.stderr
    (project / "other.jsonl").write_text((project / "logs" / "part-0.jsonl").read_text())
    baseline = decflow(env, project, "check", "refund/decflow.yaml", "-d", "other.jsonl",
                       "--baseline", "logs", "--no-prefect", "--store", "baseline-store")
    assert baseline.returncode in (0, 1), baseline.stderr
    reports = [json.loads((project / name).read_text())
               for name in ("dask.json", "threads.json", "single.json")]
    for document in reports:
        document.pop("created_at")
        document.pop("run")  # each is a run of its own
    assert reports[0] == reports[1] == reports[2]
    units = {name: stage_manifests(project / name, "records")
             for name in ("store", "thread-store", "direct-store")}
    aggregates = {name: stage_manifests(project / name, "aggregates")
                  for name in ("store", "thread-store", "direct-store")}
    assert len(units["store"]) == 4 and len(aggregates["store"]) == 1
    (key, merged), = aggregates["store"].items()
    for name in ("thread-store", "direct-store"):
        assert {k: m["sha256"] for k, m in units[name].items()} == {
            k: m["sha256"] for k, m in units["store"].items()}
        assert {k: m["sha256"] for k, m in aggregates[name].items()} == {key: merged["sha256"]}
    # the baseline's statistics: the same artifact under the same key
    assert stage_manifests(project / "baseline-store", "aggregates")[key]["sha256"] == \
        merged["sha256"]

    # checked again, unchanged: no unit is read and the aggregates are not published again
    published = {name: {p: p.stat().st_mtime_ns for p in (project / name / "stages").glob(
        "[ra]*/*/_manifest.json")} for name in ("thread-store", "direct-store")}
    again = decflow(env, project, *args, "--store", "thread-store")
    assert again.returncode == threads.returncode, again.stderr
    assert decflow(env, project, *args, "--no-prefect", "--store", "direct-store"
                   ).returncode == single.returncode
    for name, before in published.items():
        assert {p: p.stat().st_mtime_ns for p in before} == before, name
    runs = sorted((r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                   if r.parameters.get("records") == "logs"), key=lambda r: r.created)
    first = next(r for r in runs if r.parameters["store"] == "store")
    last = [r for r in runs if r.parameters["store"] == "thread-store"][-1]
    seen = recorded(prefect_api, first.id, 7)
    read = [t for t in seen["tasks"] if base_name(t) == "records"]
    assert len(read) == 4 and all(t.state.is_completed() for t in read)
    assert not [t for t in recorded(prefect_api, last.id, 4)["tasks"]
                if base_name(t) == "records"]


def test_decflow_deploy_registers_the_scheduled_deployments(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    done = decflow(env, ROOT, "deploy", "--file", str(ROOT / "deployments" / "prefect.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr

    async def read(client: Any) -> list[Any]:
        return list(await client.read_deployments())

    deployments = {d.name: d for d in api_call(prefect_api, read)}
    assert {"nightly-regression-refund", "drift-check-refund"} <= set(deployments)
    nightly = deployments["nightly-regression-refund"]
    assert nightly.work_pool_name == "decflow-process"
    assert nightly.entrypoint == "src/decflow/flows/nightly_regression.py:nightly_regression"
    assert nightly.parameters["contract"] == "contracts/refund/decflow.yaml"
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]
    drift = deployments["drift-check-refund"]
    assert [s.schedule.cron for s in drift.schedules] == ["0 */6 * * *"]
    step = nightly.pull_steps[0]["prefect.deployments.steps.set_working_directory"]
    assert step["directory"] == str(ROOT)

    # a worker of the process pool runs it (the store overridden, so nothing lands in ROOT)
    store = tmp_path / "deployed-store"
    prefect = [sys.executable, "-m", "prefect"]
    started = subprocess.run(
        [*prefect, "deployment", "run", "nightly_regression/nightly-regression-refund",
         "--param", f"store={store}"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False)
    assert started.returncode == 0, started.stderr
    worker = subprocess.run(
        [*prefect, "worker", "start", "--pool", "decflow-process", "--run-once"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    (run_dir,) = list((store / "runs").iterdir())
    assert json.loads((run_dir / "report.json").read_text())["status"] == "pass"
    # no accepted baseline in that store: the night is WARN, its passing run acceptable
    (night,) = [r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                if r.deployment_id == nightly.id and r.parameters.get("store") == str(store)]
    assert night.state.is_completed()
    assert night.state.message == (
        f"{NOT_DIFFED}\nrun {run_dir.name}: PASS ({REFUND_UNDERPOWERED}): 5/5 gates hold")
    assert "verdict:warn" in night.tags and f"run:{run_dir.name}" in night.tags
    accepted = decflow(env, tmp_path, "runs", "accept", run_dir.name, "--store", str(store))
    assert accepted.returncode == 0, accepted.stderr  # without --force


def test_a_retried_failing_nightly_is_the_same_run_and_lists_every_failing_case(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A nightly deployment run of a suite answered wrong 40 times FAILs: its judging task
    is red and its Markdown artifact lists all 40 under the gate. Retried as the UI's Retry
    does (set to Scheduled through the API), the same flow run continues the same decflow
    run: nothing is sent again, it ends with one verdict tag and one run tag, and each of
    its artifacts has one version."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.states import AwaitingRetry

    from tests.support.servers.counting import LABELS, counting_service, write_contract

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    deployed = decflow(env, ROOT, "deploy", "--file", str(ROOT / "deployments" / "prefect.yaml"))
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    worker = [sys.executable, "-m", "prefect", "worker", "start", "--pool", "decflow-process",
              "--run-once"]

    def work() -> None:
        done = subprocess.run(worker, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    def read(flow_run_id: Any) -> Any:
        return api_call(prefect_api, lambda c: c.read_flow_run(flow_run_id))

    folder = tmp_path / "suite"
    folder.mkdir()
    store = tmp_path / "store"
    with counting_service(delay_s=0) as service:
        contract = write_contract(folder, service.url, 100, 4, {"min_accuracy": 0.9})
        cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
        for case in cases[:40]:
            case["expected"] = next(label for label in LABELS if label != case["expected"])
        (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))

        async def start(client: Any) -> Any:
            deployment = await client.read_deployment_by_name(
                "nightly_regression/nightly-regression-refund")
            return await client.create_flow_run_from_deployment(
                deployment.id, parameters={"contract": str(contract), "store": str(store)})

        flow_run_id = api_call(prefect_api, start).id
        work()
        first = read(flow_run_id)
        sent_first = service.snapshot()[0]
        api_call(prefect_api, lambda c: c.set_flow_run_state(
            flow_run_id, AwaitingRetry(message="Retry from the UI"), force=True))
        work()
        second = read(flow_run_id)
        sent_second = service.snapshot()[0]
    (run_id,) = [p.name for p in (store / "runs").iterdir()]  # one decflow run
    report = json.loads((store / "runs" / run_id / "report.json").read_text())
    assert report["status"] == "fail" and report["headline"].startswith("FAIL 1/")
    assert first.state.is_failed()
    assert first.state.message.splitlines()[0] == report["headline"]
    # nothing was sent again: each case once, the first time only
    assert set(sent_first.values()) == {1} and len(sent_first) == 100
    assert sent_second == sent_first
    # the retried flow run ends like the first: one verdict tag matching its state, one run
    assert second.id == first.id and second.run_count == 2
    assert second.state.is_failed()
    assert second.state.message.splitlines()[0] == report["headline"]
    assert sorted(t for t in second.tags if t.startswith(("verdict:", "run:"))) == [
        f"run:{run_id}", "verdict:fail"]
    seen = recorded(prefect_api, flow_run_id, 7)
    # the stage that judged the gates is red on the first attempt
    judged = [t for t in seen["tasks"] if t.name == "summary: judge the gates, write the report"]
    assert judged and all(t.state.is_failed() for t in judged)
    assert judged[0].state.message == report["headline"]

    async def artifacts(client: Any) -> list[Any]:
        return list(await client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))))

    keyed = [a.key for a in api_call(prefect_api, artifacts) if a.key]
    assert keyed and len(keyed) == len(set(keyed)), keyed  # one version per key
    key = "nightly-regression-refund-refund-request-default-test"
    (markdown,) = [a for a in api_call(prefect_api, artifacts) if a.key == key]
    gate = rendered(markdown.data).split("<h3>FAIL min_accuracy", 1)[1].split("<h2>", 1)[0]
    items = [text_of(item) for item in re.findall(r"<li>(.*?)</li>", gate, flags=re.S)]
    assert {item.split(":", 1)[0] for item in items} == {c["id"] for c in cases[:40]}


NIGHTLY = """
import json
from decflow.store.runs import accept_run
from decflow.flows.common import GateFailed
from decflow.flows.nightly_regression import nightly_regression
from decflow.store.store import Store

first = nightly_regression("refund/decflow.yaml", store="store")
json.dump(first, open("first.json", "w"))
accept_run(Store("store"), first["run"]["run_id"])
try:
    nightly_regression("refund/drifted.yaml", store="store")
except GateFailed as exc:
    open("second.txt", "w").write(str(exc))
"""


def test_nightly_regression_diffs_against_the_accepted_baseline(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from decflow.views.text import short_hash

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    drifted_contract(project)
    done = subprocess.run([sys.executable, "-c", NIGHTLY], env=env, cwd=project,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr

    first = json.loads((project / "first.json").read_text())
    assert first["baseline"] is None and first["diff"] is None
    baseline_id = first["run"]["run_id"]
    assert first["run"]["status"] == "pass"
    stored = {p.name for p in (project / "store" / "runs").iterdir()} - {baseline_id}
    (candidate_id,) = [name for name in stored if "-noise" not in name]
    # the deployment's default noise_reruns: 2 re-sent the candidate's requests twice
    assert stored == {candidate_id, f"{candidate_id}-noise2"}
    candidate = json.loads((project / "store" / "runs" / candidate_id / "report.json")
                           .read_text())
    diff = json.loads((project / "store" / "runs" / candidate_id / "diff.json").read_text())
    assert diff["kind"] == "diff" and diff["status"] == "fail"
    assert candidate["status"] == "fail"
    cases = [json.loads(line) for line in (project / "refund" / "cases.jsonl").open()]
    damaged = sum("damaged" in case["input"] for case in cases)  # the rule that changed
    assert damaged and diff["counts"]["answer_flips"] == damaged

    async def nightly_runs(client: Any) -> list[Any]:
        runs = [r for r in await client.read_flow_runs()
                if r.name.startswith("refund_request-test-default-nightly-")
                and r.parameters.get("store") == "store"]
        return sorted(runs, key=lambda r: r.created)

    runs = api_call(prefect_api, nightly_runs)
    assert [r.name for r in runs] == [f"refund_request-test-default-nightly-{run_id}"
                                      for run_id in (baseline_id, candidate_id)]
    assert runs[0].state.is_completed() and runs[1].state.is_failed()
    # the failed run's state is one line naming the failing gates of the run and the diff
    message = runs[1].state.message
    # led by the diff's headline naming the diff gate, then each report's verdict
    assert message == (project / "second.txt").read_text() == (
        f"{diff['headline']}\nrun {candidate_id}: {candidate['headline']}\n"
        f"regression diff {baseline_id} → {candidate_id}: {diff['headline']}")
    assert candidate["headline"].startswith("FAIL ") and "min_accuracy" in candidate["headline"]
    assert diff["headline"].startswith("FAIL ")
    # the first night had no baseline: WARN, though its run passed (and stays acceptable)
    assert runs[0].state.message == (
        f"{NOT_DIFFED}\nrun {baseline_id}: PASS ({REFUND_UNDERPOWERED}): 5/5 gates hold")
    assert "verdict:fail" in runs[1].tags and "verdict:warn" in runs[0].tags

    # the regression result is under one key on both nights: the latest version is the diff
    key = "cli-refund-request-default-regression"
    first_seen = recorded(prefect_api, runs[0].id, 7)
    first_artifacts = {a.key: a for a in first_seen["artifacts"]}
    assert first_artifacts[key].description == NOT_DIFFED
    note = first_artifacts[key].data
    assert f"`decflow runs accept {baseline_id} --store store`" in note  # it passed
    assert f"{key}-checks" in first_artifacts
    second_seen = recorded(prefect_api, runs[1].id, 9)
    assert "diff" in {base_name(t) for t in second_seen["tasks"]}
    # the noise run's re-sends are a task of their own, with their own final progress
    (noise,) = [t for t in second_seen["tasks"] if base_name(t) == "noise"]
    assert noise.name == f"noise: re-send the requests of run {candidate_id} 2 times"
    assert noise.state.is_completed()
    resent = len(cases) * 2
    assert any(a.type == "progress" and a.data == pytest.approx(100.0)
               and a.description.startswith(f"results: {resent}/{resent} calls (100%)")
               for a in second_seen["artifacts"]), [a.description for a in second_seen[
                   "artifacts"] if a.type == "progress"]
    assert f"diff: compare run {candidate_id} with baseline {baseline_id}" in {
        t.name for t in second_seen["tasks"]}
    artifacts = {a.key: a for a in second_seen["artifacts"]}
    assert {key, f"{key}-checks", "cli-refund-request-default-test",
            "cli-refund-request-default-test-checks"} <= set(artifacts)
    assert artifacts[key].description == diff["headline"]
    assert latest_version(prefect_api, key).id == artifacts[key].id
    assert latest_version(prefect_api, f"{key}-checks").id == artifacts[f"{key}-checks"].id
    # the diff names both runs and the contract hash each ran with
    identity = diff_identity_items(rendered(artifacts[key].data))
    assert identity["run"] == f"baseline run {baseline_id}; candidate run {candidate_id}"
    hashes = [json.loads((project / "store" / "runs" / r / "run.json").read_text())[
        "contract_hash"] for r in (baseline_id, candidate_id)]
    assert identity["contract"] == "baseline {}; candidate {}".format(
        *(short_hash(h) for h in hashes))


NOT_DIFFED = ("WARN (not diffed: no accepted baseline for refund_request/default; "
              "accept one with decflow runs accept RUN)")


def latest_version(api: str, key: str) -> Any:
    """The artifact the Artifacts page shows as the latest version of `key`."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async def read(client: Any) -> list[Any]:
        return list(await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))))

    return max(api_call(api, read), key=lambda a: a.created)


def drifted_contract(folder: Path) -> Path:
    """The refund example with a changed model: damaged items are now rejected (FAIL)."""
    import yaml

    document = yaml.safe_load((folder / "refund" / "decflow.yaml").read_text())
    document["backend"]["rules"][0]["probabilities"] = {"refund": 0.02, "reject": 0.95,
                                                        "review": 0.03}
    drifted = folder / "refund" / "drifted.yaml"
    drifted.write_text(yaml.safe_dump(document, sort_keys=False))
    return drifted


def test_decflow_serve_serves_the_deployments_and_a_failing_nightly_fails_in_one_line(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import yaml

    env = {**client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home")),
           "PREFECT_RUNNER_POLL_FREQUENCY": "2"}  # pick the run up without the 10 s default
    document = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    # the same deployments registered for a worker first: serving must not take them over
    deployed = decflow(env, ROOT, "deploy", "--file", str(ROOT / "deployments" / "prefect.yaml"))
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    (project / "deployments").mkdir()
    served_file = project / "deployments" / "prefect.yaml"
    served_file.write_text(yaml.safe_dump(document))  # served as `<name>-served`
    output = project / "serve.log"
    with output.open("wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "decflow", "serve", "--file",
                                   str(served_file)], env=env, cwd=project,
                                  stdout=log, stderr=subprocess.STDOUT)

    async def everything(client: Any) -> list[Any]:
        return list(await client.read_deployments())

    async def served(client: Any) -> dict[str, Any]:
        return {d.name: d for d in await everything(client) if d.name.endswith("-served")}

    async def runs_of(client: Any, deployment: Any) -> list[Any]:
        # the schedule pre-creates runs too: ours is the one with our store
        return [r for r in await client.read_flow_runs() if r.deployment_id == deployment.id
                and r.parameters.get("store") == str(store)]

    store = project / "served-store"
    try:
        deadline = time.monotonic() + 120
        found: dict[str, Any] = {}
        while len(found) < 2:
            assert server.poll() is None, output.read_text()
            assert time.monotonic() < deadline, "decflow serve registered no deployments"
            time.sleep(1)
            found = api_call(prefect_api, served)
        nightly = found["nightly-regression-refund-served"]
        # a nightly run whose contract run FAILs, with no accepted baseline yet
        started = subprocess.run(
            [sys.executable, "-m", "prefect", "deployment", "run",
             "nightly_regression/nightly-regression-refund-served",
             "--param", f"contract={drifted_contract(project)}", "--param", f"store={store}"],
            env=env, cwd=project, capture_output=True, text=True, timeout=120, check=False)
        assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 180
        while True:
            (run,) = api_call(prefect_api, lambda c: runs_of(c, nightly))
            if run.state.is_final():
                break
            assert server.poll() is None, output.read_text()
            assert time.monotonic() < deadline, f"the served run is still {run.state.type}"
            time.sleep(1)
        time.sleep(1)  # the run's process writes its last lines
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    after = {d.name: d for d in api_call(prefect_api, everything)}
    for entry in document["deployments"]:
        kept = after[entry["name"]]  # as `decflow deploy` registered it, serve or no serve
        assert kept.work_pool_name == "decflow-process" and not kept.paused, kept
        assert after[f"{entry['name']}-served"].work_pool_name is None
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]
    assert nightly.parameters["store"] == ".decflow"
    drift = found["drift-check-refund-served"]
    assert drift.parameters["records"] == "examples/refund-drift/records"

    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    report = json.loads((store / "runs" / run_id / "report.json").read_text())
    assert run.state.is_failed()
    assert run.state.message == (f"{report['headline']}\nrun {run_id}: {report['headline']}\n"
                                 f"{NOT_DIFFED}")
    assert report["headline"].startswith("FAIL ") and "min_accuracy" in report["headline"]
    assert run.name == f"refund_request-test-default-nightly-{run_id}"
    assert {"decflow", "decflow-heartbeat", f"run:{run_id}", "verdict:fail"} <= set(run.tags)
    printed = output.read_text()
    assert "crash detection" in printed
    assert "Traceback" not in printed and "Engine execution exited" not in printed
    finished = [line for line in printed.splitlines() if "Finished in state Failed(" in line
                and "Flow run" in line]
    assert len(finished) == 1 and run_id in finished[0], printed
    seen = recorded(prefect_api, run.id, 8)
    # keyed by the deployment: never a version of a run started by hand
    note = {a.key: a.data for a in seen["artifacts"]}[
        "nightly-regression-refund-served-refund-request-default-regression"]
    assert f"decflow runs accept {run_id}" not in note
    assert "it is FAIL, so it should not become the baseline" in note
    assert "accept a run that passes" in note


# The shortest crash window decflow allows: its runs heartbeat every 30 s (Prefect's
# minimum), so a killed run is marked Crashed 40-45 s after its last heartbeat.
CRASH_WINDOW_S = 40


def heartbeat_times(api: str, flow_run_id: Any) -> list[Any]:
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    async def read(client: Any) -> list[Any]:
        page = await client.read_events(EventFilter(
            event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])),
            limit=50)  # the server refuses the client's default of 100
        return sorted(event.occurred for event in page.events)

    found: list[Any] = api_call(api, read)
    return found


def children_of(pid: int) -> list[int]:
    """The processes `pid` started (its crash follower)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def task_runs_of(api: str, flow_run_id: Any) -> list[Any]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read(client: Any) -> list[Any]:
        return list(await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))))

    found: list[Any] = api_call(api, read)
    return found


def until(condition: Any, timeout_s: float) -> Any:
    """Poll `condition()` every second until it returns something truthy (or time is up:
    its last value)."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(1)
    return value


def test_the_crash_webhooks_call_the_url_the_server_reaches(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The crash automations' webhooks are called by the server, so they keep the API URL
    of the first setup (or `--api-url`): a client reaching the server by another URL (here
    `localhost` for 127.0.0.1) leaves them as they are unless it passes `--api-url`."""
    from decflow.flows.crash_by_heartbeat import HOOKS

    home = tmp_path_factory.mktemp("prefect-client-home")
    here, elsewhere = client_env(prefect_api, home), client_env(
        prefect_api.replace("127.0.0.1", "localhost"), home)
    other_url = elsewhere["PREFECT_API_URL"]

    def called() -> set[str]:
        async def read(client: Any) -> set[str]:
            return {str((await client.read_block_document_by_name(
                name, block_type_slug="webhook")).data["url"]).removesuffix(path)
                for name, path in HOOKS.items()}
        found: set[str] = api_call(prefect_api, read)
        return found

    def forget_webhooks() -> None:
        async def delete(client: Any) -> None:
            for name in HOOKS:
                block = await client.read_block_document_by_name(name,
                                                                 block_type_slug="webhook")
                await client.delete_block_document(block.id)
        api_call(prefect_api, delete)

    try:
        assert decflow(here, tmp_path, "prefect-setup").returncode == 0
        forget_webhooks()
        first = decflow(elsewhere, tmp_path, "prefect-setup")  # first setup: its own URL
        assert first.returncode == 0, first.stderr
        assert first.stdout.startswith("crash detection updated")  # new webhook blocks
        assert f"through its API at {other_url} " in first.stdout
        assert called() == {f"{other_url}/"}
        moved = decflow(elsewhere, tmp_path, "prefect-setup", "--api-url", f"{prefect_api}/")
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout.startswith("crash detection updated")
        assert called() == {f"{prefect_api}/"}
        # a later setup or deploy from the other URL leaves the server's URL
        again = decflow(elsewhere, tmp_path, "prefect-setup")
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("crash detection unchanged")
        assert f"through its API at {prefect_api} " in again.stdout
        assert called() == {f"{prefect_api}/"}
        wrong = decflow(here, tmp_path, "prefect-setup", "--api-url", "127.0.0.1:4200/api")
        assert wrong.returncode == 2
        assert wrong.stderr.startswith("error: --api-url: expected an http(s) URL")
        assert called() == {f"{prefect_api}/"}
    finally:
        decflow(here, tmp_path, "prefect-setup", "--api-url", prefect_api)


def test_a_killed_flow_run_ends_crashed_with_no_task_run_left_running(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SIGKILL during a call shard: the run's follower ends it and its running task runs
    Crashed within seconds, naming the run and the command that resumes it. Killed together
    with its follower (a lost machine), the server's automations end the flow run and every
    task run within the heartbeat window, log the resume command and leave a final progress
    artifact, with no other flow run started."""
    from decflow.flows.crash_by_heartbeat import AUTOMATION_NAME, TASK_AUTOMATION_NAME
    from tests.integration.test_resume_kill import (
        CASES,
        MAX_CONCURRENCY,
        kill_when_sent,
        recorded_ids,
    )
    from tests.support.servers.counting import CountingService, write_contract

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    setup = [decflow(env, tmp_path, "prefect-setup", "--crash-after", str(CRASH_WINDOW_S))
             for _ in range(2)]
    assert [d.returncode for d in setup] == [0, 0], setup[0].stderr + setup[1].stderr
    assert setup[0].stdout.startswith(("crash detection created", "crash detection updated"))
    assert setup[1].stdout.startswith("crash detection unchanged")  # idempotent
    for name in (AUTOMATION_NAME, TASK_AUTOMATION_NAME):
        (automation,) = api_call(prefect_api, lambda c, n=name: c.read_automations_by_name(n))
        assert automation.trigger.within.total_seconds() == CRASH_WINDOW_S
    service = CountingService(delay_s=0.1)  # slow enough for a progress update before 300
    service.thread.start()
    command = [sys.executable, "-m", "decflow", "test", "--store", "store", "--prefect"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([*command, str(contract)], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def new_run(before: set[str]) -> str:
        (found,) = {p.name for p in (tmp_path / "store" / "runs").iterdir()} - before
        return found

    def open_tasks(flow_run_id: Any) -> list[Any]:
        return [t for t in task_runs_of(prefect_api, flow_run_id) if not t.state.is_final()]

    def flow_runs() -> int:
        # Runs something started; the server's scheduler adds runs of the cron deployments
        # earlier tests registered whenever its loop comes round: those ran nothing.
        runs = api_call(prefect_api, lambda c: c.read_flow_runs())
        return sum(1 for r in runs if not r.auto_scheduled)

    try:
        contract = write_contract(tmp_path, service.url, CASES, MAX_CONCURRENCY)
        run = start()
        kill_when_sent(service, run, 300)
        run_id = new_run(set())
        recorded_before_kill = recorded_ids(tmp_path / "store")
        (killed,) = tagged(prefect_api, run_id)
        # the follower: Crashed within seconds, the shard's task run too
        killed = until(lambda: (r := api_call(prefect_api, lambda c: c.read_flow_run(
            killed.id))).state.is_final() and r, 30)
        leftover = until(lambda: not open_tasks(killed.id), 30)
        sent_before, _ = service.snapshot()
        resumed = decflow(env, tmp_path, "test", str(contract), "--store", "store",
                          "--prefect", "--resume", run_id, "-o", "resumed.json")
        assert resumed.returncode in (0, 1), resumed.stderr
        resent = service.snapshot()[0] - sent_before

        # killed with its follower: the automations, once its heartbeats stopped
        before = sum(service.snapshot()[0].values())
        second = start()
        until(lambda: children_of(second.pid), 60)
        followers = children_of(second.pid)
        deadline = time.monotonic() + 120
        while sum(service.snapshot()[0].values()) - before < 300:
            assert second.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        for pid in [*followers, second.pid]:
            os.kill(pid, signal.SIGKILL)
        second.wait()
        killed_at = time.monotonic()
        started = flow_runs()
        lost_id = new_run({run_id})
        (lost,) = tagged(prefect_api, lost_id)
        closed = until(lambda: (r := api_call(prefect_api, lambda c: c.read_flow_run(
            lost.id))).state.is_final() and not open_tasks(lost.id) and r, 120)
        closed_after = time.monotonic() - killed_at
        assert flow_runs() == started  # nothing else ran meanwhile

        def crash_written(found: dict[str, Any]) -> bool:
            return any(e.name == "decflow.crash" for e in found["logs"]) and sum(
                a.type == "progress" for a in found["artifacts"]) == 2

        seen = until(lambda: (found := recorded(prefect_api, lost.id, 1)) and crash_written(
            found) and found, 30)
    finally:
        service.server.shutdown()
        service.server.server_close()
        decflow(env, tmp_path, "prefect-setup", "--crash-after", "90")  # the default again
    store = tmp_path / "store"
    resume = f"`decflow test {contract} --store {store} --resume {run_id}`"
    assert killed.state.is_crashed(), killed.state
    assert killed.state.message.startswith(f"decflow run {run_id}: its process died")
    assert killed.state.message.endswith(f"resume it with {resume}")
    assert leftover, [(t.name, t.state.type) for t in open_tasks(killed.id)]
    shards = [t for t in task_runs_of(prefect_api, killed.id)
              if t.name.startswith("results: call backend")]
    assert shards and all(t.state.is_crashed() for t in shards)
    (_, finished) = tagged(prefect_api, run_id)
    assert finished.state.is_completed()  # a live run with heartbeats is left alone
    assert {"decflow", "decflow-heartbeat", f"run:{run_id}"} <= set(finished.tags)
    assert recorded_before_kill and not recorded_before_kill & set(resent)
    assert set(resent) == {f"c{i:04d}" for i in range(CASES)} - recorded_before_kill
    assert set(resent.values()) == {1}
    report = json.loads((tmp_path / "resumed.json").read_text())
    assert report["run"]["id"] == run_id
    assert report["metrics"]["counts"]["total"] == CASES
    assert report["metrics"]["counts"]["errored"] == 0

    # the lost run: flow run and every task run Crashed within 120 s of the kill
    assert closed, [(t.name, t.state.type) for t in open_tasks(lost.id)]
    assert closed.state.is_crashed() and "No heartbeat for 40 s" in closed.state.message
    assert closed_after <= 120, closed_after
    beats = heartbeat_times(prefect_api, lost.id)
    assert beats, "the killed run sent no heartbeat"
    silent = (closed.state.timestamp - beats[-1]).total_seconds()
    assert CRASH_WINDOW_S <= silent <= CRASH_WINDOW_S + 30, silent
    tasks = task_runs_of(prefect_api, lost.id)
    shard = [t for t in tasks if t.name.startswith("results: call backend")]
    assert shard and all(t.state.is_crashed() for t in shard)
    assert all(t.state.is_final() for t in tasks)
    # the log names the run and the command that resumes it, with absolute paths
    lost_resume = f"`decflow test {contract} --store {store} --resume {lost_id}`"
    (line,) = [e.message for e in seen["logs"] if e.name == "decflow.crash"]
    assert line.startswith(f"No heartbeat for 40 s: decflow run {lost_id}: its process died")
    assert line.endswith(f"resume it with {lost_resume}")
    # the progress artifact's final version says where the calls stopped
    progress = sorted((a for a in seen["artifacts"] if a.type == "progress"),
                      key=lambda a: a.created)
    assert len(progress) == 2
    final = progress[-1]
    assert re.match(rf"stopped at results: \d+/{CASES} calls: No heartbeat for 40 s: "
                    rf"decflow run {lost_id}", final.description), final.description
    assert 0 < final.data < 100


def test_a_flow_that_cannot_run_exits_2_without_a_traceback(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    env.pop("DECGUARD_STAGING_TOKEN", None)
    env.pop("DECFLOW_DEBUG", None)
    env["DECFLOW_ALLOW_CREDENTIALS"] = "http://localhost:8080"  # the token may go there
    done = decflow(env, project, "test", "refund/decflow.yaml", "-b", "staging", "--prefect",
                   "--store", "store")
    assert done.returncode == 2
    # it failed before any answer: nothing of the run is kept, and the advice is to run again
    assert list((project / "store" / "runs").iterdir()) == []
    assert ("error: http backend 'staging': environment variable DECGUARD_STAGING_TOKEN"
            in done.stderr)
    assert "nothing of the run was kept: fix that, then run the command again" in done.stderr
    assert "Traceback" not in done.stderr
    (flow_run,) = [r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                   if (r.parameters.get("spec") or {}).get("backend") == "staging"]
    assert flow_run.state.is_failed() and "verdict:error" in flow_run.tags

    # a backend that refuses every call: the shard that sent them is not green either
    import yaml

    port = free_port()  # nothing listens there
    document = yaml.safe_load((project / "refund" / "decflow.yaml").read_text())
    document["backends"]["staging"]["url"] = f"http://127.0.0.1:{port}/decide"
    (project / "refund" / "closed.yaml").write_text(yaml.safe_dump(document))
    env["DECGUARD_STAGING_TOKEN"] = "not-a-secret"
    env["DECFLOW_ALLOW_CREDENTIALS"] = f"http://127.0.0.1:{port}"
    refused = decflow(env, project, "test", "refund/closed.yaml", "-b", "staging", "--prefect",
                      "--no-healthcheck", "--store", "store")
    assert refused.returncode == 2, refused.stderr
    assert "failed on every case" in refused.stderr
    (flow_run,) = [r for r in api_call(prefect_api, lambda c: c.read_flow_runs())
                   if (r.parameters.get("spec") or {}).get("contract_path") == "refund/closed.yaml"]
    assert flow_run.state.is_failed()
    tags = flow_run.tags
    assert "verdict:error" in tags and sum(t.startswith("verdict:") for t in tags) == 1
    (shard,) = [t for t in recorded(prefect_api, flow_run.id, 3)["tasks"]
                if t.name.startswith("results: call backend")]
    assert shard.state.is_failed()
    assert shard.state.message.startswith("every call of this shard failed (11 of 11); first: ")


REPLAY = """
import json, sys
from decflow.flows.common import GateFailed
from decflow.flows.replay import replay

try:
    replay(sys.argv[1], store="store")
except GateFailed as exc:
    open("replay-failed.txt", "w").write(str(exc))
"""


def test_replay_flow_reproduces_stored_failures(
    prefect_api: str, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    fuzz = decflow(env, project, "fuzz", "refund/decflow.yaml", "-b", "order_sensitive",
                   "--no-prefect", "--store", "store", "-p", "option_order", "-o", "fuzz.json")
    assert fuzz.returncode == 1, fuzz.stderr  # the position-biased model fails option_order
    run_id = json.loads((project / "fuzz.json").read_text())["run"]["id"]
    direct = decflow(env, project, "replay", run_id, "--store", "store", "-f", "json")
    assert direct.returncode == 1, direct.stderr
    expected = json.loads(direct.stdout)
    flowed = subprocess.run([sys.executable, "-c", REPLAY, run_id], env=env, cwd=project,
                            capture_output=True, text=True, timeout=300, check=False)
    assert flowed.returncode == 0, flowed.stderr
    assert "FAIL" in (project / "replay-failed.txt").read_text()

    async def find(client: Any) -> list[Any]:
        return [r for r in await client.read_flow_runs() if r.name == f"replay-{run_id}"]

    (flow_run,) = api_call(prefect_api, find)
    assert flow_run.state.is_failed()
    seen = recorded(prefect_api, flow_run.id, 1)
    assert {base_name(t) for t in seen["tasks"]} == {"replay"}
    (note,) = [a.data for a in seen["artifacts"] if a.type == "markdown"]
    reproduced = [o for o in expected["outcomes"] if o["reproduced"]]
    assert reproduced and f"# Replay of {run_id}" in note
    assert note.startswith(f"**{expected['headline']}**")
    assert flow_run.state.message == expected["headline"]


def test_sequential_run_as_a_flow_groups_batches_into_shard_tasks(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.support.planted import planted_contract

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    contract = planted_contract(tmp_path / "suite", 1000, wrong=0.03, flips=0.005)
    common = ("test", str(contract), "--all", "--sequential", "--batch", "8", "--order-seed",
              "0", "--store", str(tmp_path / "store"))
    direct = decflow(env, tmp_path, *common, "--no-prefect", "-o", "direct.json")
    assert direct.returncode == 0, direct.stderr
    flowed = decflow(env, tmp_path, *common, "--prefect", "-o", "flow.json")
    assert flowed.returncode == 0, flowed.stderr
    report = json.loads((tmp_path / "flow.json").read_text())
    keyed = (*RUN_KEYED_STAGES, "cases", "requests")
    left = compare.normalized(report, keyed)
    right = compare.normalized(json.loads((tmp_path / "direct.json").read_text()), keyed)
    for side in (left, right):
        for key in ("call_seconds", "seconds_saved"):
            side["sequential"].pop(key)
    assert left == right
    assert report["sequential"]["calls_made"] < report["sequential"]["calls_full"]
    flow_run = flow_run_of(prefect_api, report["run"]["id"])
    seen = recorded(prefect_api, flow_run.id, 8)
    names = [t.name for t in seen["tasks"]]
    # One task per group of batches of about a shard of requests, never one per case,
    # named by the batches it judged and the calls it sent: together the report's
    section = report["sequential"]
    groups = sorted((re.fullmatch(r"results: sequential batches (\d+)-(\d+) \((\d+) calls?\)",
                                  name) for name in names if name.startswith(
                                      "results: sequential")), key=lambda m: int(m[1]))
    assert groups and all(groups), names
    assert int(groups[0][1]) == 1
    assert all(int(a[2]) + 1 == int(b[1]) for a, b in itertools.pairwise(groups))
    assert int(groups[-1][2]) == math.ceil(section["cases_sent"] / 8)  # batches of 8 cases
    assert sum(int(g[3]) for g in groups) == section["calls_made"]
    assert len(names) <= 20
    # the progress artifact is final: the calls the report counts, and why it stopped
    (progress,) = [a for a in seen["artifacts"] if a.type == "progress"]
    calls = section["calls_made"]
    assert progress.data == pytest.approx(100.0)
    assert progress.description.startswith(f"results: {calls}/{calls} calls (100%)")
    assert progress.description.endswith(
        f"; stopped: {section['stop_reason']} ({section['calls_full']} calls at most)")


def _counting_suite(folder: Path, url: str, *, wrong: int) -> Path:
    """The counting service's refund suite (120 cases, the http backend with no retry) with
    `wrong` cases expecting another label than the service answers."""
    import yaml

    from tests.support.servers.counting import LABELS, write_contract

    folder.mkdir()
    contract = write_contract(folder, url, 120, 8, {"min_accuracy": 0.8})
    document = yaml.safe_load(contract.read_text())
    document["backend"]["max_retries"] = 0
    contract.write_text(yaml.safe_dump(document, sort_keys=False))
    cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    for case in cases[:wrong]:
        case["expected"] = next(label for label in LABELS if label != case["expected"])
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return contract


def test_every_runner_sends_each_request_once_and_reports_what_the_backend_saw(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted at a real HTTP server (max_retries 0): a sequential run sends, under the
    Prefect thread runner and on Dask workers, exactly the requests of the direct run (a
    clear pass stops early, a clear fail too), each once, and the report's call count is
    what the server received; a full run likewise. The flow process replays the recorded
    batches without sending (it used to send every one again)."""
    import distributed

    from tests.support.servers.counting import counting_service

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    for name in ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        monkeypatch.setenv(name, env[name])  # the spawned Dask workers inherit these
    runs: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    with counting_service(delay_s=0) as service, \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     host="127.0.0.1", dashboard_address=None) as cluster:
        runners = {"direct": ("--no-prefect",), "thread": ("--prefect",),
                   "dask": ("--prefect", "--task-runner", "dask", "--dask-address",
                            cluster.scheduler_address)}
        suites = {"pass": ("--sequential", "--batch", "8", "--order-seed", "3"),
                  "fail": ("--sequential", "--batch", "8", "--order-seed", "3"),
                  "full": ()}
        for suite, options in suites.items():
            contract = _counting_suite(tmp_path / suite, service.url,
                                       wrong=0 if suite == "pass" else 60)
            for runner, how in runners.items():
                before = service.snapshot()[0]
                out = tmp_path / f"{suite}-{runner}.json"
                done = decflow(env, tmp_path, "test", str(contract), *options, *how,
                               "--store", str(tmp_path / f"store-{runner}"), "-o", str(out))
                assert done.returncode == (0 if suite == "pass" else 1), done.stderr
                received = service.snapshot()[0] - before
                assert set(received.values()) == {1}, (suite, runner)  # each case once
                runs[suite, runner] = (sum(received.values()), json.loads(out.read_text()))
    for suite in suites:
        sent, report = runs[suite, "direct"]
        section = report.get("sequential")
        made = section["calls_made"] if section else report["run"]["artifacts"]["requests"][
            "rows"]
        assert sent == made  # the report's count is the server's
        if section:
            assert made < section["calls_full"] == 120  # decided early
        for runner in ("thread", "dask"):
            assert runs[suite, runner][0] == sent, (suite, runner)
            assert runs[suite, runner][1].get("sequential", {}).get("calls_made") == (
                section or {}).get("calls_made")
    # the early PASS rests on zero_limit: the flow run's state message says so too
    passed = runs["pass", "thread"][1]
    assert passed["headline"].startswith("PASS (zero_limit: max_error_rate judged at 0.02")
    assert flow_run_of(prefect_api, passed["run"]["id"]).state.message == passed["headline"]


def test_the_call_cache_under_prefect_and_dask_and_in_the_report_artifact(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run under Prefect stores its answers; the same run on Dask workers serves every
    one from the store (0 requests at the server); each flow run's Markdown report artifact
    counts the requests sent (misses) and the answers served from the cache (hits)."""
    import distributed

    from tests.support.servers.counting import counting_service

    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    for name in ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        monkeypatch.setenv(name, env[name])  # the spawned Dask workers inherit these
    with counting_service(delay_s=0) as service, \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     host="127.0.0.1", dashboard_address=None) as cluster:
        contract = _counting_suite(tmp_path / "suite", service.url, wrong=0)
        sent, reports = [], []
        for how in (("--prefect",), ("--prefect", "--task-runner", "dask", "--dask-address",
                                     cluster.scheduler_address)):
            before = service.total_received()
            out = tmp_path / f"report-{len(reports)}.json"
            done = decflow(env, tmp_path, "test", str(contract), *how, "--call-cache",
                           "read-write", "--store", str(tmp_path / "store"), "-o", str(out))
            assert done.returncode == 0, done.stderr
            sent.append(service.total_received() - before)
            reports.append(json.loads(out.read_text()))
    assert sent == [120, 0]
    for report, (asked, served) in zip(reports, ((120, 0), (0, 120)), strict=True):
        assert (report["call_cache"]["requests_sent"],
                report["call_cache"]["served_from_cache"]) == (asked, served)
        flow_run = flow_run_of(prefect_api, report["run"]["id"])
        seen = recorded(prefect_api, flow_run.id, 6)
        (markdown,) = [a for a in seen["artifacts"] if a.type == "markdown"
                       and not a.key.endswith("-html")]
        assert (f"Call cache read-write: {asked} requests sent to the backend, {served} "
                f"answers served from the cache") in markdown.data.replace("\\", "")
