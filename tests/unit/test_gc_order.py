"""`runs gc --keep N` keeps a decision's newest runs by when they were made, also for runs
made within one second (their ids' random suffixes must not decide which run goes)."""

from __future__ import annotations

from pathlib import Path

from decflow.pipeline.spec import RunSpec
from decflow.store.removal import collect_garbage
from decflow.store.runs import write_run_record
from decflow.store.store import Store

SECOND = "2026-01-02T03:04:05+00:00"


def _store_run(store: Store, run_id: str, spec: dict[str, object]) -> None:
    write_run_record(store, {"run_id": run_id, "spec": spec, "decision": "d",
                             "backend": "default", "status": "pass", "created_at": SECOND})


def test_keep_one_keeps_the_run_made_last_within_one_second(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    # made in this order within one second: the last has the smallest suffix
    made = ("20260102-030405-888888", "20260102-030405-ffffff", "20260102-030405-000000")
    specs = {run_id: RunSpec("c.yaml", "store", run_id, created_at=SECOND).to_dict()
             for run_id in made}
    for run_id in reversed(made):
        _store_run(store, run_id, specs[run_id])
    removal = collect_garbage(store, keep=1, older_than=None, dry_run=True)
    assert removal.runs == sorted(made[:2])


def test_runs_recorded_without_nanoseconds_go_by_id_within_their_second(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    made = ("20260102-030405-ffffff", "20260102-030405-000000")
    for run_id in made:
        spec = RunSpec("c.yaml", "store", run_id, created_at=SECOND).to_dict()
        del spec["created_ns"]
        _store_run(store, run_id, spec)
    # an earlier second always counts as older, whatever the suffix
    _store_run(store, "20260102-030404-ffffff", {})
    removal = collect_garbage(store, keep=1, older_than=None, dry_run=True)
    assert removal.runs == ["20260102-030404-ffffff", "20260102-030405-000000"]
