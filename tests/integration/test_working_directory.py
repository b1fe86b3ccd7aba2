"""Nothing planted in the working directory runs (issue 21, class 2): a checkout with a
`decflow/` package, a `json.py`, a `polars.py` and a `pickle.py` in it, as an untrusted
pull request could carry, is never imported by the console script or by any child process
decflow starts — the scan child of a check of 32 MB or more, its spawned record workers,
a plugin backend's worker, a probe agent's worker, Prefect's CLI, Dask's workers."""

from __future__ import annotations

import binascii
import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from decflow.data.scan_process import PROCESS_SCAN_BYTES
from decflow.pipeline.production.workers import PROCESS_RECORDS
from tests.support.console import console, install_plugin, with_path
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

# pickle.py: what a spawned worker (multiprocessing, Dask) imports before it takes its
# parent's import path
PLANTED = ("decflow/__init__.py", "json.py", "polars.py", "pickle.py")
PLUGIN = """\
    from decflow.backends.base import Backend, Prediction

    class Fixed(Backend):
        provider = "fixedplug"

        @classmethod
        def from_config(cls, config, *, name, decision):
            return cls(name, config.get("model"))

        async def predict(self, request):
            import json  # the worker's json: stdlib, never the planted one
            json.dumps(request.input)
            return Prediction({label: float(label == "refund")
                               for label in request.decision.labels})
    """


def plant(folder: Path, markers: Path) -> None:
    """Modules that leave a marker file when imported, and then fail."""
    for relative in PLANTED:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = markers / relative.replace("/", "_")
        path.write_text(f"open({str(marker)!r}, 'w').close()\n"
                        "raise ImportError('planted module imported')\n")


def large_parquet(path: Path) -> None:
    """Refund decision records: at least PROCESS_RECORDS of them (spawned workers read
    them) and PROCESS_SCAN_BYTES of file (the scan runs in a child)."""
    n = PROCESS_RECORDS
    rng = np.random.default_rng(21)
    # 32 random bytes per record as hex: about 64 MB that no encoding can shrink much
    inputs = np.frombuffer(binascii.hexlify(rng.bytes(32 * n)), dtype="S64").astype("U64")
    n_ = pl.col("n")
    pl.DataFrame({"n": np.arange(n), "input": inputs}).select(
        id=pl.format("r{}", n_),
        decision=pl.lit("refund_request"),
        input=pl.col("input"),
        probabilities=pl.struct(refund=pl.lit(0.8), reject=pl.lit(0.1), review=pl.lit(0.1)),
        selected=pl.lit("refund"),
        outcome=pl.when(n_ % 3 == 0).then(pl.lit("reject")).otherwise(pl.lit("refund")),
        latency_ms=(n_ % 97).cast(pl.Float64),
        metadata_json=pl.lit('{"locale": "en"}'),
    ).write_parquet(path, compression="uncompressed")
    assert path.stat().st_size >= PROCESS_SCAN_BYTES


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(the planted working directory, the markers folder, the environment)."""
    work, markers = tmp_path / "checkout", tmp_path / "markers"
    work.mkdir()
    markers.mkdir()
    plant(work, markers)
    site = install_plugin(tmp_path / "site", "wd_plugin", PLUGIN,
                          {"decflow.backends": {"fixedplug": "wd_plugin:Fixed"}})
    env = {**with_path(site), "DECFLOW_STORE": str(tmp_path / "store")}
    return work, markers, env


def imported(markers: Path) -> list[str]:
    return sorted(path.name for path in markers.iterdir())


def test_a_check_of_a_large_file_imports_nothing_from_the_checkout(
    tmp_path: Path, checkout: tuple[Path, Path, dict[str, str]]
) -> None:
    work, markers, env = checkout
    contract = work / "decflow.yaml"
    shutil.copy(ROOT / "contracts" / "refund" / "decflow.yaml", contract)
    large_parquet(tmp_path / "records.parquet")
    done = console("check", str(contract), "-d", str(tmp_path / "records.parquet"),
                   cwd=work, env=env)
    assert done.returncode in (0, 1), done.stderr
    assert imported(markers) == []


def test_a_plugin_backend_and_a_probe_agent_import_nothing_from_the_checkout(
    checkout: tuple[Path, Path, dict[str, str]]
) -> None:
    work, markers, env = checkout
    (work / "cases.jsonl").write_text(
        '{"id": "c1", "input": "a parcel", "expected": "refund"}\n'
        '{"id": "c2", "input": "a refund", "expected": "refund"}\n')
    (work / "decflow.yaml").write_text(
        'schema_version: "0.1"\n'
        "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
        "backend: {provider: fixedplug, model: f-1}\n"
        "dataset: cases.jsonl\n")
    done = console("test", "decflow.yaml", cwd=work, env=env)
    assert done.returncode == 0, done.stderr

    # the agent module lives in the checkout (it is named on the command line), but the
    # checkout comes last on its worker's path: its `import json` is the standard one
    (work / "wd_agent.py").write_text(
        "import json\n\n"
        "def agent(text):\n"
        "    return json.loads(json.dumps('allow' if 'a' in text else 'block'))\n")
    (work / "inputs.txt").write_text("alpha\nbeta\nomicron\n")
    done = console("probe", "--agent", "wd_agent:agent", "--inputs", "inputs.txt",
                   "--repeats", "2", cwd=work, env=env)
    assert done.returncode in (0, 1), done.stderr
    assert "agent calls" in done.stdout
    assert imported(markers) == []


def test_prefects_cli_is_started_away_from_the_checkout(
    checkout: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from decflow.commands.orchestrate import prefect_cli

    work, markers, env = checkout
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert prefect_cli("--version", cwd=work, env=dict(os.environ)) == 0
    assert imported(markers) == []


def test_dask_workers_of_a_local_cluster_import_nothing_from_the_checkout(
    checkout: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    from distributed import Client

    from decflow.flows.runners import isolated_local_cluster

    work, markers, _env = checkout
    monkeypatch.chdir(work)
    with isolated_local_cluster(n_workers=1, threads_per_worker=1, processes=True,
                                host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert client.submit(sum, [1, 2]).result() == 3
    assert imported(markers) == []
