"""The one driver runs any pipeline: a pipeline built in tests/ (`tests.support.pipelines`:
three stages declared out of order, the first fanned out) runs in this process with the
ordering, caching, run record, `--from-stage`, continuing runs and stop states every
built-in pipeline gets. (Its Prefect flow: tests/orchestration/test_pipeline_flow.py.)"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from decflow.errors import DecflowError, Interrupted
from decflow.pipeline.driver import drive
from decflow.pipeline.pipeline import Pipeline, ordered
from decflow.pipeline.stage import Stage
from decflow.store.runs import new_run_id
from decflow.store.store import Store
from tests.support.paths import ROOT
from tests.support.pipelines import COUNT, NUMBERS, SQUARES, TOTAL, CountSpec

CONTRACT = str(ROOT / "contracts" / "refund" / "decflow.yaml")


def spec_in(store: Path, **changes: Any) -> CountSpec:
    return CountSpec(CONTRACT, str(store), new_run_id(), **changes)


def record(store: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((store / "runs" / run_id / "run.json").read_text()))


def published(store: Path, stage: str) -> dict[str, str]:
    """key -> sha256 of every published artifact of `stage`."""
    return {p.parent.name: json.loads(p.read_text())["sha256"]
            for p in (store / "stages" / stage).glob("*/_manifest.json")}


def test_the_order_follows_upstream_not_the_listing() -> None:
    assert [s.name for s in COUNT.stages] == ["numbers", "squares", "total"]
    with pytest.raises(ValueError, match="cycle"):
        ordered((replace(NUMBERS, upstream=("total",)), SQUARES, TOTAL))
    with pytest.raises(ValueError, match="twice"):
        ordered((NUMBERS, NUMBERS))
    with pytest.raises(ValueError, match="more than one verdict stage"):
        replace(COUNT, stages=(NUMBERS, replace(SQUARES, verdict=True), TOTAL))


def test_a_new_pipeline_runs_in_process_and_is_recorded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = spec_in(store)
    report = drive(COUNT, spec, Store(str(store)))
    assert report == {"kind": "count", "status": "pass", "exit_code": 0, "total": 285,
                      "headline": "PASS: total 285 <= 1000"}
    found = record(store, spec.run_id)
    assert (found["kind"], found["status"], found["exit_code"]) == ("count", "pass", 0)
    assert list(found["stages"]) == list(found["timings_s"]) == ["numbers", "squares", "total"]
    assert len(published(store, "chunk")) == 3  # one unit per chunk of 4

    # the same count again: every unit and stage but the run's own verdict is a cache hit
    before = {stage: published(store, stage) for stage in ("chunk", "numbers", "squares")}
    again = spec_in(store, limit=100)
    assert drive(COUNT, again, Store(str(store)))["headline"] == "FAIL: total 285 > 100"
    assert {stage: published(store, stage) for stage in before} == before
    assert record(store, again.run_id)["status"] == "fail"


def test_from_stage_reuses_what_comes_before_and_continues_a_finished_run(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    first = spec_in(store)
    drive(COUNT, first, Store(str(store)))
    later = replace(first, run_id=new_run_id(), parent=first.run_id, limit=200)
    ran: list[str] = []
    report = drive(COUNT, later, Store(str(store)), from_stage="squares",
                   on_stage=lambda name, _manifest: ran.append(name))
    assert ran == ["squares", "total"] and report["status"] == "fail"
    assert record(store, later.run_id)["stages"]["numbers"] == \
        record(store, first.run_id)["stages"]["numbers"]
    with pytest.raises(DecflowError, match=r"unknown stage 'sums' \(stages: numbers, squares, "
                                           r"total\)"):
        drive(COUNT, replace(later, run_id=new_run_id()), Store(str(store)), from_stage="sums")


def stopping(error: BaseException) -> Pipeline[CountSpec]:
    def stop(_context: Any, _key: str) -> Any:
        raise error

    squares: Stage[CountSpec] = replace(SQUARES, compute=stop)
    return replace(COUNT, stages=(NUMBERS, squares, TOTAL))


def test_an_error_leaves_the_run_failed_with_its_error_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = spec_in(store)
    with pytest.raises(DecflowError) as raised:
        drive(stopping(DecflowError("squares.parquet: disk full")), spec, Store(str(store)))
    assert str(raised.value) == (
        f"run {spec.run_id} failed: squares.parquet: disk full; fix that, then finish the run "
        f"with `{spec.resume_command()}`")
    found = record(store, spec.run_id)
    assert (found["status"], found["error"]) == ("failed", "squares.parquet: disk full")
    assert list(found["stages"]) == ["numbers"]


def test_an_interruption_leaves_the_run_interrupted_and_resumable(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = spec_in(store)
    with pytest.raises(Interrupted) as raised:
        drive(stopping(KeyboardInterrupt()), spec, Store(str(store)))
    assert (raised.value.run_id, raised.value.resume) == (spec.run_id, spec.resume_command())
    assert record(store, spec.run_id)["status"] == "interrupted"
    # the same spec finishes it (its lock was let go), reusing the stored units
    units = published(store, "chunk")
    assert drive(COUNT, spec, Store(str(store)))["status"] == "pass"
    assert published(store, "chunk") == units
    assert record(store, spec.run_id)["status"] == "pass"


def test_a_run_without_an_id_is_driven_but_not_recorded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = replace(spec_in(store), run_id="")
    with pytest.raises(KeyboardInterrupt):  # not turned into a run's interruption
        drive(stopping(KeyboardInterrupt()), spec, Store(str(store)))
    assert not (store / "runs").exists()
