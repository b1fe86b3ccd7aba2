"""No exit 0 without a report: a plugin backend or a probe agent that calls `sys.exit(0)`,
`os._exit(0)`, `sys.exit(1)`, raises `GeneratorExit` or `KeyboardInterrupt`, or hangs
costs one errored case, never the run (issue 21, class 1). Through the console script,
as CI runs it; the hang is bounded by `DECFLOW_CALL_TIMEOUT` / `--call-timeout`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.console import CONSOLE, console, install_plugin, with_path

pytestmark = pytest.mark.slow

HOSTILE = """\
    import os
    import sys
    import time

    from decflow.backends.base import Backend, Prediction

    def misbehave(text, marker=None):
        if text == "exit0":
            sys.exit(0)
        if text == "osexit":
            os._exit(0)
        if text == "exit1":
            sys.exit(1)
        if text == "generator":
            raise GeneratorExit
        if text == "interrupt":
            raise KeyboardInterrupt
        if text == "hang":
            if marker:
                open(marker, "w").close()
            time.sleep(3600)

    class Hostile(Backend):
        provider = "hostile"

        @classmethod
        def from_config(cls, config, *, name, decision):
            backend = cls(name, config.get("model"))
            backend.marker = config.get("marker")
            return backend

        async def predict(self, request):
            misbehave(request.input, self.marker)  # blocks the event loop on "hang"
            return Prediction({label: float(label == "refund")
                               for label in request.decision.labels})

    def agent(text):
        misbehave(text)
        return "allow" if "a" in text else "block"

    from decflow.properties.paraphrasers import Paraphraser

    class HostileParaphraser(Paraphraser):
        provider = "hostileparaphrase"

        def __init__(self, settings, *, base_dir, seed):
            pass

        def paraphrase(self, text, *, n, case_id):
            misbehave(text)
            return [text + " indeed"]
    """
MISBEHAVIOURS = {"exit0": "exception", "osexit": "exception", "exit1": "exception",
                 "generator": "exception", "interrupt": "exception", "hang": "timeout"}


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    folder = install_plugin(tmp_path / "site", "hostile_plugin", HOSTILE, {
        "decflow.backends": {"hostile": "hostile_plugin:Hostile"},
        "decflow.paraphrasers": {"hostileparaphrase": "hostile_plugin:HostileParaphraser"},
    })
    install_plugin(tmp_path / "site2", "exits_on_import", "import sys\nsys.exit(0)\n",
                   {"decflow.backends": {"exitsonimport": "exits_on_import:Thing"}})
    install_plugin(tmp_path / "site3", "dies_on_import", "import os\nos._exit(0)\n",
                   {"decflow.backends": {"diesonimport": "dies_on_import:Thing"}})
    return {**with_path(folder, tmp_path / "site2", tmp_path / "site3"),
            "DECFLOW_CALL_TIMEOUT": "2",
            "DECFLOW_STORE": str(tmp_path / "store")}


def write_contract(folder: Path, provider: str = "hostile", properties: Any = None,
                   **backend: str) -> Path:
    texts = []
    for index, hostile in enumerate(MISBEHAVIOURS):
        texts += [f"fine {index}", hostile]
    texts.append("fine last")
    with (folder / "cases.jsonl").open("w") as out:
        for number, text in enumerate(texts):
            out.write(json.dumps({"id": f"c{number}", "input": text, "expected": "refund"}) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice",
                     "options": ["refund", "reject", "review"]},
        "backend": {"provider": provider, "model": "h-1", **backend},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": 1},
        "requirements": {"min_accuracy": 0.5},
        **({"properties": properties} if properties else {}),
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract))
    return path


def test_a_plugin_that_exits_or_hangs_costs_its_cases_not_the_report(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    contract = write_contract(tmp_path)
    started = time.monotonic()
    done = console("test", str(contract), "-f", "json", cwd=tmp_path, env=plugin_env)
    elapsed = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    stored = json.loads((tmp_path / "store" / "runs" / report["run"]["id"] /
                         "report.json").read_text())
    assert stored["status"] == report["status"]
    errors = {case["input"]: case["error"].split(":")[0]
              for case in report["failures"] if case["kind"] == "error"}
    assert errors == MISBEHAVIOURS
    counts = report["metrics"]["counts"]
    assert (counts["errored"], counts["succeeded"]) == (len(MISBEHAVIOURS), 7)
    assert counts["errors_by_kind"] == {"exception": 5, "timeout": 1}
    assert elapsed < 60  # one 2 s timeout, a few worker restarts


def test_a_paraphraser_plugin_that_exits_or_hangs_costs_its_cases_not_the_report(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    contract = write_contract(tmp_path, provider="mock", properties={
        "paraphrase": {"source": {"provider": "hostileparaphrase"}, "max_tv_distance": 1.0}})
    started = time.monotonic()
    done = console("fuzz", str(contract), "-f", "json", cwd=tmp_path, env=plugin_env)
    assert done.returncode in (0, 1), done.stderr
    summary = json.loads(done.stdout)["properties"]["summaries"][0]
    assert (summary["property"], summary["n_errors"]) == ("paraphrase", len(MISBEHAVIOURS))
    assert time.monotonic() - started < 60


def test_a_plugin_that_exits_while_it_is_imported_stops_with_exit_2(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    expected = {"exitsonimport": "failed to import: SystemExit: 0",
                "diesonimport": "exited with code 0"}
    for provider, message in expected.items():
        contract = write_contract(tmp_path, provider=provider)
        for command in (["validate", str(contract)], ["test", str(contract)]):
            done = console(*command, cwd=tmp_path, env=plugin_env)
            assert done.returncode == 2, (command, done.stdout, done.stderr)
            assert provider in done.stderr and message in done.stderr, done.stderr


def test_a_probe_agent_that_exits_or_hangs_costs_its_calls_not_the_report(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    inputs = ["alpha one", *MISBEHAVIOURS, "delta", "gamma two"]
    (tmp_path / "inputs.txt").write_text("\n".join(inputs) + "\n")
    started = time.monotonic()
    done = console("probe", "--agent", "hostile_plugin:agent", "--inputs", "inputs.txt",
                   "--repeats", "2", "-f", "json", cwd=tmp_path, env=plugin_env)
    elapsed = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["calls"]["errors"] == 2 * len(MISBEHAVIOURS)  # two meter draws each
    assert (tmp_path / "store" / "runs" / report["run"]["id"] / "report.json").is_file()
    assert elapsed < 60

    refused = console("probe", "--agent", "hostile_plugin:agent", "--inputs", "inputs.txt",
                      "--call-timeout", "0", cwd=tmp_path, env=plugin_env)
    assert refused.returncode == 2 and "call timeout 0.0" in refused.stderr


def test_a_real_ctrl_c_still_interrupts_a_run_stuck_in_a_plugin(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    marker = tmp_path / "hanging"
    contract = write_contract(tmp_path, marker=str(marker))
    env = {**os.environ, **plugin_env, "DECFLOW_CALL_TIMEOUT": "600"}
    process = subprocess.Popen([str(CONSOLE), "test", str(contract)], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the plugin never reached its hang"
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    run_id = next((tmp_path / "store" / "runs").iterdir()).name
    marker.unlink()
    resumed = console("test", str(contract), "--resume", run_id, "-f", "json", cwd=tmp_path,
                      env={**plugin_env, "DECFLOW_CALL_TIMEOUT": "2"})
    assert resumed.returncode in (0, 1), resumed.stderr
    assert json.loads(resumed.stdout)["run"]["id"] == run_id
