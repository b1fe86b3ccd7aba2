"""The nightly regression deployment against a model that is never quite repeatable.

A real `prefect server`, `decflow serve` serving a nightly deployment of an evidence-gated
contract (`max_answer_flip_rate: 0.02`, `max_accuracy_drop: 0.02`) whose backend is the
seeded noisy decision server (`tests.support.servers.noisy_decider`: 8 % of answers flip
between two calls of the same input, and the model never changes), each night started with
`run_deployment`. Night 1 has no baseline and is accepted; nights 2 and 3 diff the same
model against it — DecGuard's point rule would FAIL both on the flip gate — and must not
FAIL. Night 4 runs a planted regression (15 % of the cases answered wrong): the flow run
ends Failed and its diff artifact names the gates and their intervals.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.orchestration.test_orchestration import (  # the module's server fixture
    api_call,
    client_env,
    prefect_api,
    recorded,
)
from tests.support.paths import ROOT
from tests.support.servers.noisy_decider import NoisyDecider, dataset_lines
from tests.support.servers.recording import RecordingServer

pytestmark = pytest.mark.orchestration

__all__ = ["prefect_api"]
CASES = 300
DEPLOYMENT = "nightly-regression-noisy"
SERVED = f"{DEPLOYMENT}-served"  # `decflow serve` names what it serves apart from deploy's


def contract(url: str) -> dict[str, Any]:
    return {
        "schema_version": "0.1",
        "decision": {"name": "noisy_refund", "type": "choice",
                     "options": ["refund", "reject", "review"]},
        "backend": {"provider": "http", "url": url, "model": "noisy-v1"},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": 16},
        "regression": {"max_answer_flip_rate": 0.02, "max_accuracy_drop": 0.02,
                       "gating": "evidence"},
    }


def night(api: str, parameters: dict[str, Any]) -> Any:
    from prefect.deployments import run_deployment

    async def start(_client: Any) -> Any:
        return await run_deployment(f"nightly_regression/{SERVED}",
                                    parameters=parameters, timeout=600)

    return api_call(api, start)


def test_noise_never_fails_the_night_and_a_planted_regression_does(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from decflow.store.runs import accept_run, list_runs
    from decflow.store.store import Store
    from decflow.views.markdown import md

    decider = NoisyDecider(seed=25)
    (tmp_path / "deployments").mkdir()
    (tmp_path / "cases.jsonl").write_text(dataset_lines(decider, CASES))
    env = {**client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home")),
           "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    entry = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())["deployments"][0]
    with RecordingServer(decider) as server:
        for name, path in (("noisy.yaml", "/decide"), ("broken.yaml", "/broken/decide")):
            (tmp_path / name).write_text(yaml.safe_dump(contract(server.url(path))))
        entry.update(name=DEPLOYMENT, schedules=[], parameters={
            "contract": "noisy.yaml", "store": "store", "noise_reruns": 2})
        served_file = tmp_path / "deployments" / "prefect.yaml"
        served_file.write_text(yaml.safe_dump({"deployments": [entry]}))
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            serving = subprocess.Popen(
                [sys.executable, "-m", "decflow", "serve", "--file", str(served_file)],
                env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120

            async def deployed(client: Any) -> list[Any]:
                return [d for d in await client.read_deployments() if d.name == SERVED]

            while not api_call(prefect_api, deployed):
                assert serving.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "decflow serve registered nothing"
                time.sleep(1)
            first = night(prefect_api, {"contract": "noisy.yaml"})
            assert first.state.is_completed(), first.state
            store = Store(tmp_path / "store")
            (baseline,) = [r["run_id"] for r in list_runs(store).records]
            accept_run(store, baseline)
            quiet = [night(prefect_api, {"contract": "noisy.yaml"}) for _ in range(2)]
            planted = night(prefect_api, {"contract": "broken.yaml"})
        finally:
            serving.send_signal(signal.SIGTERM)
            serving.wait(timeout=60)
    diffs = {r["run_id"]: json.loads((tmp_path / "store" / "runs" / r["run_id"] /
                                      "diff.json").read_text())
             for r in list_runs(store).records if r.get("kind", "run") == "run"
             and (tmp_path / "store" / "runs" / r["run_id"] / "diff.json").exists()}
    assert len(diffs) == 3
    ordered = [diffs[k] for k in sorted(diffs)]
    for flow_run, diff in zip(quiet, ordered[:2], strict=True):
        assert flow_run.state.is_completed(), (flow_run.state, diff["headline"])
        assert diff["status"] != "fail"
        assert diff["evidence"]["noise"]["measured"]
        flips = diff["shift"]["answer_flip_rate"]
        assert flips > 0.02  # DecGuard's point rule would have failed this night
    assert planted.state.is_failed(), planted.state
    broken = ordered[2]
    assert broken["status"] == "fail"
    gates = {g["gate"]: g for g in broken["evidence"]["gates"]}
    assert gates["max_accuracy_drop"]["verdict"] == "fails"
    seen = recorded(prefect_api, planted.id, 8)
    # the nightly's regression result, under one key: <deployment>-<decision>-<backend>-…
    artifact = next(a.data for a in seen["artifacts"]
                    if (a.key or "").endswith("noisy-refund-default-regression"))
    assert md("max_accuracy_drop") in artifact  # (Markdown escapes the underscores)
    # the decision with its interval: "accuracy -… points [a, b], noise ±…: regressed"
    assert md(gates["max_accuracy_drop"]["phrase"]) in artifact
    assert broken["headline"].startswith("FAIL")
