"""A production check from start to end, recorded as a run: load the contract, plan the
input into units, `records` per unit (on all cores), `aggregates`, then `summary` and
`report` — the same stages and store layout as the `production_check` flow, so a direct
check and a Prefect one store the same things (`runs/<run_id>/` plus the units' statistics
and id hashes; never a copy of the records)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from decflow.data.record_units import Scanned, scan_in_background
from decflow.data.scan_process import scan_beside, worth_a_process
from decflow.redaction import redact

if TYPE_CHECKING:
    from decflow.metrics.production import GroupStats
    from decflow.pipeline.stage import Progress
    from decflow.store.store import Manifest, Store

# Light on purpose (the store, polars and the contract models are imported where they are
# used): a check starts hashing its input first, and the hash overlaps those imports.
Scanning = Callable[[], Scanned]


_scans_ahead: dict[str, Scanning] = {}


def scan_ahead(records: str) -> None:
    """Start the scan of `records` before the command line is parsed; the next
    `start_scan(records)` takes it over."""
    _scans_ahead[records] = _start(records)


def start_scan(records: str) -> Scanning:
    """Start hashing and counting the records (`run_check(scanning=…)`), or take over the
    scan `scan_ahead` started for the same `records`."""
    return _scans_ahead.pop(records, None) or _start(records)


def _start(records: str) -> Scanning:
    # a large local input in a child process (no GIL shared with the imports), else a thread
    if worth_a_process(records):
        return scan_beside(records)
    return scan_in_background(records)


def run_check(
    contract_path: str,
    records: str,
    baseline: str | None = None,
    *,
    fail_on_warn: bool = False,
    store: Store | str | None = None,
    progress: Progress | None = None,
    scanning: Scanning | None = None,
) -> dict[str, Any]:
    """Check the records at `records` (a file, folder or glob of .jsonl/.json/.parquet,
    local or on object storage) against the contract, optionally against `baseline`
    (records or an earlier check report). The stages are published in `store` (default
    `$DECFLOW_STORE`, else `.decflow`), cached by contract and input bytes, and the check is
    recorded as a run there. `scanning`: `start_scan(records)`, started earlier. Returns
    the report; raises `DecflowError` (exit 2) on bad input."""
    scanned = scanning or start_scan(records)
    from decflow.pipeline.production import stages
    from decflow.pipeline.production.units import plan_scanned
    from decflow.pipeline.spec import load_contract_cached
    from decflow.store.runs import new_run_id
    from decflow.store.store import open_store

    loaded = load_contract_cached(contract_path)
    opened = open_store(store)
    plan = plan_scanned(records, *scanned())
    staged = stages.stage_records(opened, loaded.contract, loaded.hash, plan, progress=progress)
    aggregates, merged = stages.stage_aggregates_merged(
        opened, loaded.contract, loaded.hash, plan, staged.outcomes, staged.held
    )
    return summarize_and_record(opened, contract_path, records, baseline, new_run_id(),
                                aggregates, fail_on_warn=fail_on_warn, merged=merged)


def summarize_and_record(
    store: Store,
    contract_path: str,
    records_path: str,
    baseline: str | None,
    run_id: str,
    aggregates: Manifest,
    *,
    fail_on_warn: bool = False,
    merged: dict[str, GroupStats] | None = None,
) -> dict[str, Any]:
    """The `summary` and `report` stages: merge the stored statistics (or take them as
    merged in this process), judge drift and gates, and record the report as run
    `run_id`."""
    from decflow.pipeline.production import stages
    from decflow.pipeline.spec import load_contract_cached

    loaded = load_contract_cached(contract_path)
    contract = loaded.contract
    statistics = stages.stored_aggregates(store, contract, aggregates, shown_path=records_path,
                                          merged=merged)
    against = None if baseline is None else stages.load_baseline(contract, baseline, store)
    report = stages.summarize(
        contract, statistics, against, contract_path=contract_path, contract_hash=loaded.hash,
        fail_on_warn=fail_on_warn,
    )
    report["run"] = {"id": run_id, "store": store.location}
    redacted: dict[str, Any] = redact(report)  # records may hold a credential it names
    record_check(store, run_id, redacted, aggregates)
    return redacted


def record_check(store: Store, run_id: str, report: dict[str, Any],
                 aggregates: Manifest) -> None:
    """The check report and a run record in the shape `decflow runs` lists (the record
    first: the report's sha256 goes into it)."""
    from decflow.store.runs import write_report, write_run_record

    write_run_record(store, {
        "run_id": run_id,
        "kind": "check",
        "decision": report["contract"]["name"],
        "contract_hash": report["contract"]["hash"],
        "dataset_hash": report["dataset"]["hash"],
        "backend": "records",
        "mode": "check",
        "status": report["status"],
        "exit_code": report["exit_code"],
        "stages": {"aggregates": aggregates.to_dict()},
    })
    write_report(store, run_id, report)
