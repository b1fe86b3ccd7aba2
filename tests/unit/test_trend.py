"""The trend's run order: oldest first, also for runs created within one second (their ids'
random suffixes must not order them, or the same commands give a different trend)."""

from __future__ import annotations

from pathlib import Path

from decflow.pipeline.spec import RunSpec
from decflow.pipeline.trend import decision_trend
from decflow.store.runs import write_report, write_run_record
from decflow.store.store import Store

SECOND = "2026-01-02T03:04:05+00:00"


def _store_run(store: Store, run_id: str, gate: str, spec: dict[str, object]) -> None:
    write_run_record(store, {"run_id": run_id, "spec": spec, "decision": "d",
                             "backend": "default", "status": "pass"})
    write_report(store, run_id, {"created_at": SECOND, "metrics": {}, "checks": [
        {"gate": gate, "level": "requirement", "metric": gate, "value": 0.0,
         "status": "pass", "threshold": 0.0}]})


def _spec(run_id: str) -> dict[str, object]:
    return RunSpec("c.yaml", "store", run_id, created_at=SECOND).to_dict()


def test_runs_made_in_one_second_keep_their_creation_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    # made in this order within one second; every suffix order of their ids
    specs = {run_id: _spec(run_id) for run_id in ("20260102-030405-ffffff",
                                                  "20260102-030405-000000",
                                                  "20260102-030405-888888")}
    for run_id, spec in reversed(specs.items()):  # stored in another order than made
        _store_run(store, run_id, f"gate_of_{run_id[-6:]}", spec)
    trend = decision_trend(store, "d")
    assert [row["run_id"] for row in trend["runs"]] == list(specs)
    assert trend["gates"] == ["gate_of_ffffff", "gate_of_000000", "gate_of_888888"]


def test_runs_recorded_without_nanoseconds_sort_by_id_within_their_second(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    made = ("20260102-030405-ffffff", "20260102-030405-000000")
    for run_id in made:
        old = {**_spec(run_id)}
        del old["created_ns"]
        _store_run(store, run_id, "g", old)
        assert RunSpec.from_dict(old).created_ns is None
    assert [row["run_id"] for row in decision_trend(store, "d")["runs"]] == sorted(made)
