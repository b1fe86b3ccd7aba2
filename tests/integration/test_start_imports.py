"""What a plain remote `decflow test` has not loaded when its first wave of requests starts
(`pipeline/contract_run/first_wave.py`, in the main thread, so what it has loaded by then
does not depend on thread timing): package metadata, which neither pydantic (plugins off)
nor a contract of built-in providers needs, and the validators of the sections the contract
leaves out (`contracts.parse.UNSET_WHEN_ABSENT`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import RUN_DECFLOW
from tests.support.servers.counting import counting_service, write_contract

# Runs `decflow ARGS` and, as the first wave starts, prints the modules loaded and the
# sections' models whose validators were built, then ends the process.
AT_THE_WAVE = """
import os, sys
from decflow.pipeline.contract_run import first_wave
def begin(self):
    from decflow.contracts.gates import golden_gates_model
    from decflow.contracts.properties import properties_model
    built = [m.__name__ for m in (golden_gates_model(), properties_model())
             if m.__pydantic_complete__]
    print(" ".join(sorted(sys.modules)), "|", " ".join(built) or "none", flush=True)
    os._exit(0)
first_wave.FirstWave.begin = begin
""" + RUN_DECFLOW


def test_the_first_wave_starts_before_package_metadata_and_absent_sections_load(
        tmp_path: Path) -> None:
    with counting_service(delay_s=0.005) as service:
        contract = write_contract(tmp_path, service.url, 20, max_concurrency=4)
        done = subprocess.run(
            [sys.executable, "-c", AT_THE_WAVE, "test", str(contract), "--no-healthcheck",
             "--store", str(tmp_path / "store")],
            capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    modules, built = done.stdout.strip().split(" | ")
    loaded = set(modules.split())
    assert "decflow.pipeline.contract_run.first_wave" in loaded  # (the wave's own code)
    assert loaded.isdisjoint({"importlib.metadata", "email", "zipfile", "polars"})
    # the contract sets requirements, and neither warnings nor properties: the requirements'
    # model (also the warnings') is built, the properties' (every property's settings) is not
    assert built == "GoldenGates"
