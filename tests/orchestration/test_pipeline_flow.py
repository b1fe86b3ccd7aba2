"""The contract-run and check flows are one generic stage loop: a pipeline built in tests/
(`tests.support.pipelines.COUNT`: three stages, the first fanned out) runs as a Prefect flow
(`decflow.flows.stage_loop.pipeline_flow`) with one task per stage and per unit, recorded
like any run, with the same stage keys and artifacts as the in-process driver gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from decflow.pipeline.driver import drive
from decflow.store.runs import new_run_id
from decflow.store.store import Store
from tests.orchestration.test_orchestration import (  # the module's server fixture
    base_name,
    client_env,
    flow_run_of,
    prefect_api,
    recorded,
)
from tests.support.paths import ROOT
from tests.support.pipelines import COUNT, CountSpec

pytestmark = pytest.mark.orchestration

__all__ = ["prefect_api"]
CONTRACT = str(ROOT / "contracts" / "refund" / "decflow.yaml")
IN_A_FLOW = """
import json, sys
from decflow.flows.common import flow_result
from decflow.flows.stage_loop import pipeline_flow
from tests.support.pipelines import COUNT
state = pipeline_flow(pipeline=COUNT.ref, spec=json.loads(sys.argv[1]), return_state=True)
print(json.dumps(flow_result(state)))
"""


def stages_of(store: Path) -> dict[str, dict[str, str]]:
    """stage -> key -> sha256 of every artifact in a store."""
    return {folder.name: {p.parent.name: json.loads(p.read_text())["sha256"]
                          for p in folder.glob("*/_manifest.json")}
            for folder in (store / "stages").iterdir()}


def test_a_pipeline_from_tests_runs_as_a_flow_like_in_process(
    prefect_api: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    here = CountSpec(CONTRACT, str(tmp_path / "here"), new_run_id())
    direct = drive(COUNT, here, Store(here.store_url))
    spec = CountSpec(CONTRACT, str(tmp_path / "flow"), new_run_id())
    env = client_env(prefect_api, tmp_path_factory.mktemp("prefect-client-home"))
    done = subprocess.run([sys.executable, "-c", IN_A_FLOW, json.dumps(spec.to_dict())],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"run_id": spec.run_id, "status": "pass", "exit_code": 0,
                       "headline": direct["headline"],
                       "report": f"runs/{spec.run_id}/report.json", "caveats": []}

    flowed, local = stages_of(Path(spec.store_url)), stages_of(Path(here.store_url))
    for stage in ("chunk", "numbers", "squares"):  # the same keys and bytes in both runners
        assert flowed[stage] == local[stage], stage
    assert len(flowed["chunk"]) == 3 and len(flowed["total"]) == 1  # the verdict: per run
    record: dict[str, Any] = json.loads(
        (Path(spec.store_url) / "runs" / spec.run_id / "run.json").read_text())
    assert (record["kind"], record["status"], list(record["stages"])) == (
        "count", "pass", ["numbers", "squares", "total"])

    flow_run = flow_run_of(prefect_api, spec.run_id)
    assert flow_run.name == f"count-{spec.run_id}"
    seen = recorded(prefect_api, flow_run.id, 6)
    assert seen["flow_run"].state.is_completed()
    assert seen["flow_run"].state.message == direct["headline"]
    assert "verdict:pass" in seen["flow_run"].tags
    assert sorted(t.name for t in seen["tasks"]) == [
        "chunk: count 0 to 3", "chunk: count 4 to 7", "chunk: count 8 to 9",
        "numbers: count, chunk by chunk", "squares: square the numbers",
        "total: judge the sum of the squares"]
    assert {base_name(t) for t in seen["tasks"]} == {"chunk", "numbers", "squares", "total"}
    assert all(t.state.is_completed() for t in seen["tasks"])
