"""What a remote `decflow test` does while its backend is called: the code and views of the
stages after the calls are prepared then (`commands.ahead`, the later stages' `Deferred`
computes), never before the first request and never beside a later stage, and the run's
report is the one a run without that overlap writes."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from decflow.store.store import Store
from tests.support.cli import RUN_DECFLOW, run_cli
from tests.support.compare import normalized
from tests.support.paths import ROOT
from tests.support.servers.counting import counting_service, write_contract

CASES = 150


def test_the_pipeline_is_defined_without_the_code_after_the_calls() -> None:
    """Importing the contract run's pipeline loads none of the later stages' code nor the
    sequential driver: a run's first request does not wait for them."""
    found = subprocess.run(
        [sys.executable, "-c", "import sys, decflow.pipeline.contract_run.runner; "
         "print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    for later in ("decflow.pipeline.contract_run.summary",
                  "decflow.pipeline.contract_run.comparisons",
                  "decflow.pipeline.contract_run.sequential.calls",
                  "decflow.views.outputs", "decflow.views.html"):
        assert later not in found


# What a run of the golden suite needs only once its calls are done, or never: loaded by
# the ahead thread during the calls, by the stage that uses it, or not at all.
NOT_BEFORE_THE_FIRST_REQUEST = (
    "numpy", "decflow.gates", "decflow.metrics", "decflow.diagnostics",
    "decflow.pipeline.contract_run.summary", "decflow.pipeline.contract_run.golden_section",
    "decflow.report.run_report", "decflow.views.outputs", "decflow.views.html",
    "decflow.properties.base", "decflow.pipeline.contract_run.sequential.calls", "prefect",
)

FIRST_REQUEST_MODULES = """
import asyncio.selector_events as events, os, sys
write = events._SelectorSocketTransport.write
def first(self, data):
    print(" ".join(sorted(sys.modules)), flush=True)
    os._exit(0)
events._SelectorSocketTransport.write = first
""" + RUN_DECFLOW


@pytest.mark.parametrize(("options", "calling"), [
    # the first wave's requests (`first_wave.py`), sent before the run's tables are built
    (["--no-healthcheck"], "decflow.backends.engine"),
    # the health check, which the call stage sends before its first request
    ([], "decflow.pipeline.contract_run.results"),
])
def test_nothing_needed_only_after_the_calls_is_loaded_before_the_first_request(
        tmp_path: Path, options: list[str], calling: str) -> None:
    """A golden run's first request goes out before the code of its verdicts, numpy and
    its views are loaded (the modules each process had when it wrote its first request)."""
    with counting_service(delay_s=0.01) as service:
        contract = write_contract(tmp_path, service.url, 20, max_concurrency=4)
        done = subprocess.run(
            [sys.executable, "-c", FIRST_REQUEST_MODULES, "test", str(contract),
             *options, "--store", str(tmp_path / "store")],
            capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert calling in loaded  # (it is the code that wrote the request)
    early = [name for name in loaded
             if any(name == later or name.startswith(f"{later}.")
                    for later in NOT_BEFORE_THE_FIRST_REQUEST)]
    assert early == []


def _report(store: Path) -> dict[str, Any]:
    (run,) = (store / "runs").iterdir()
    # each run in a store of its own: its paths named alike
    text = (run / "report.json").read_text().replace(str(store), "STORE")
    report: dict[str, Any] = json.loads(text)
    return normalized(report, ("results", "summary"))


def test_a_run_prepares_its_later_stages_during_the_calls_and_reports_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.commands import ahead, contract_run
    from decflow.pipeline.contract_run import summary

    events: list[tuple[str, float, int]] = []
    frozen: list[int] = []
    with counting_service(delay_s=0.01) as service:
        def answered() -> int:
            return sum(service.snapshot()[1].values())

        def traced(spec: Any, store: Any, chunks: Any) -> Any:
            work = ahead.after_calls(spec, store, chunks)

            def run() -> None:
                events.append(("work", time.monotonic(), answered()))
                frozen.append(gc.get_freeze_count())
                work()
                events.append(("worked", time.monotonic(), answered()))

            return run

        build = summary.build_report_to_write

        def building(*args: Any, **kwargs: Any) -> Any:
            events.append(("summary", time.monotonic(), answered()))
            return build(*args, **kwargs)

        taken: list[bool] = []
        prepared = summary.prepared_answers

        def taking(*args: Any) -> Any:
            answers = prepared(*args)
            taken.append(answers is not None)
            return answers

        answers = ahead._prepare_answers

        def preparing_answers(*args: Any) -> None:
            frozen.append(gc.get_freeze_count())  # the calls are in flight
            answers(*args)

        monkeypatch.setattr(ahead, "_prepare_answers", preparing_answers)
        monkeypatch.setattr(contract_run, "after_calls", traced)
        monkeypatch.setattr(summary, "build_report_to_write", building)
        monkeypatch.setattr(summary, "prepared_answers", taking)
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=4)
        code, _, err = run_cli("test", str(contract), "--store", str(tmp_path / "a"))
        assert code == 0, err
        # the same run without the overlap: everything prepared where it is first used
        monkeypatch.setattr(ahead.Ahead, "_start", lambda self: None)
        code, _, err = run_cli("test", str(contract), "--store", str(tmp_path / "b"))
        assert code == 0, err
    names = [name for name, _, _ in events]
    assert names == ["work", "worked", "summary", "summary"], events
    (_, _, first), (_, ended, _), (_, judged, _), _ = events
    assert 1 <= first < CASES  # from the first answer, while the calls are in flight
    assert ended <= judged  # joined before the summary stage
    assert taken == [True, False]  # each answer's result made during the calls, then not
    # what the work made is out of the collections' sight during the calls (nothing else
    # freezes during a stage: without it, the count can only fall)
    assert frozen[1] > frozen[0], frozen
    assert _report(tmp_path / "a") == _report(tmp_path / "b")


def _results(store: Store, report: dict[str, Any]) -> pl.DataFrame:
    from decflow.store.runs import read_run_record
    from decflow.store.store import Manifest

    manifest = read_run_record(store, report["run"]["id"])["stages"]["results"]
    return store.read(Manifest.from_dict(manifest)).drop("latency_ms").sort("request_id")


def test_shards_called_side_by_side_record_what_shards_called_in_turn_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of small shards (`--all`: originals, then transformed requests, some blocked
    by an original that errored) records the same results and report whether its shards
    are called side by side in one loop (`results.call_phase`) or one after the other."""
    from decflow.pipeline.contract_run import results
    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec
    from decflow.store.runs import new_run_id

    with counting_service(delay_s=0.005) as service:
        service.failing_ids = {"c0003", "c0010"}
        contract = write_contract(tmp_path, service.url, 40, max_concurrency=6)
        document = yaml.safe_load(contract.read_text())
        document["properties"] = {"option_order": {"samples": 2, "max_tv_distance": 0.9}}
        contract.write_text(yaml.safe_dump(document, sort_keys=False))
        store = Store(str(tmp_path / "store"))
        reports = []
        for overlapping in (True, False):
            monkeypatch.setattr(results, "overlaps_shards",
                                lambda *_, side_by_side=overlapping: side_by_side)
            spec = RunSpec(contract_path=str(contract), store_url=store.url,
                           run_id=new_run_id(), mode="all", shard_size=7, rounding_seed=7)
            reports.append(run_contract(spec, store))
        sent = service.snapshot()[0]
    side_by_side, in_turn = reports
    # (the stages keyed by the run, and the comparisons keyed by its results' manifest)
    keyed = ("results", "comparisons", "minimized", "summary")
    assert normalized(side_by_side, keyed) == normalized(in_turn, keyed)
    assert_frame_equal(_results(store, side_by_side), _results(store, in_turn))
    assert side_by_side["metrics"]["counts"]["errored"] == 2
    # every request sent once per run (the errored originals' variants never)
    assert set(sent.values()) == {2}


def test_the_report_shown_last_is_kept_until_the_process_ends(tmp_path: Path) -> None:
    """The command leaves its report referenced as it exits (`decflow.cli._exit` ends the
    process without freeing it object by object); only the last one is kept."""
    from decflow.commands import contract_run

    for store in ("a", "b"):
        code, _, err = run_cli("test", str(ROOT / "contracts" / "refund" / "decflow.yaml"),
                               "--store", str(tmp_path / store))
        assert code == 0, err
    (kept,) = contract_run._LAST_REPORT
    (run,) = (tmp_path / "b" / "runs").iterdir()
    assert kept["run"]["id"] == run.name
    assert len(kept["results"]) == json.loads((run / "report.json").read_text())[
        "dataset"]["n_cases"]
