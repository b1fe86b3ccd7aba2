"""A production check from start to end in this process: scan and plan the input into
units, then the check's pipeline (`CHECK`: `aggregates`, its `records` units read on all
cores, then `summary`) through the one driver, as the `production_check` flow runs it
through the generic stage loop, so a direct check and a Prefect one store the same things
(`runs/<run_id>/` plus the units' statistics and id hashes; never a copy of the records)
and either can resume the other's (`check --resume RUN`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from decflow.data.records.units import Scanned, scan_in_background
from decflow.data.scan_process import scan_beside, worth_a_process

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.data.records.units import SourcePlan
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.stage import Progress
    from decflow.store.store import Store

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
    records: str | None,
    baseline: str | None = None,
    *,
    fail_on_warn: bool = False,
    store: Store | str | None = None,
    progress: Progress | None = None,
    scanning: Scanning | None = None,
    resume: str | None = None,
    from_stage: str | None = None,
) -> dict[str, Any]:
    """Check the records at `records` (a file, folder or glob of .jsonl/.json/.parquet,
    local or on object storage) against the contract, optionally against `baseline`
    (records, an earlier check report or a check run). The stages are published in `store`
    (default `$DECFLOW_STORE`, else `.decflow`), cached by contract and input bytes, and the
    check is recorded as a run there. `scanning`: `start_scan(records)`, started earlier.
    `resume`: finish the stored check run `resume` (or continue a finished one as a new
    run; `records` then says where its records are now, default where they were).
    Returns the report; raises `DecflowError` (exit 2) on bad input."""
    if resume is None and records is None:
        from decflow.errors import DecflowError

        raise DecflowError("a check needs its records (-d RECORDS) or a run to resume")
    scanned = (scanning or start_scan(records)) if records is not None else None
    from decflow.data.records.units import plan_scanned
    from decflow.pipeline.driver import drive
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.production.summary import CHECK
    from decflow.pipeline.spec import load_contract_cached
    from decflow.store.runs import new_run_id
    from decflow.store.store import open_store

    loaded = load_contract_cached(contract_path)  # while the records are scanned
    opened = open_store(store)
    if resume is not None:
        def plan(source: str) -> SourcePlan:
            return plan_scanned(source, *(scanned or start_scan(source))())

        spec = resumed_check(opened, resume, contract_path, records, plan)
    else:
        assert records is not None and scanned is not None
        spec = CheckSpec(contract_path, records, opened.location, new_run_id(),
                         plan_scanned(records, *scanned()), baseline)
    return drive(CHECK, spec, opened, loaded=loaded, from_stage=from_stage,
                 fail_on_warn=fail_on_warn,
                 progress=None if progress is None else (lambda _name, _total: progress))


def resumed_check(store: Store, run_id: str, contract_path: str, records: str | None,
                  plan: Callable[[str], SourcePlan]) -> CheckSpec:
    """The spec that finishes stored check run `run_id` (`check --resume`): its baseline
    and records, which must hash as they did (read from `records` when they moved), with
    the contract at `contract_path`, which must hash as it did. A finished check is never
    changed: the spec is then a new run that continues it (`parent`). `plan` hashes, counts
    and splits records into units."""
    from dataclasses import replace

    from decflow.errors import DecflowError
    from decflow.pipeline.driver import resumable
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.store.runs import FINISHED, new_run_id, now_iso

    record = resumable(store, run_id, "check", contract_path)
    if "spec" not in record:
        raise DecflowError(f"run {run_id} was recorded by an older decflow, which kept no "
                           "spec of it to resume; run the check again")
    stored = CheckSpec.from_dict(record["spec"])
    source = records or stored.records
    planned = plan(source)
    if planned.hash != stored.plan.hash:
        raise DecflowError(f"run {run_id} checked records that hash to {stored.plan.hash}, "
                           f"but {source} now hashes to {planned.hash}; start a new check "
                           "instead")
    spec = replace(stored, contract_path=contract_path, records=source, plan=planned,
                   store_url=store.location)
    if record["status"] in FINISHED:
        return replace(spec, run_id=new_run_id(), parent=run_id, created_at=now_iso())
    return spec


def check_records(
    contract: Contract,
    records: str,
    baseline: str | None = None,
    *,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The check of `records` through the same stages, in a store in memory, not recorded as
    a run (the SDK's and the tests' quick check of a contract object)."""
    import uuid
    from pathlib import Path

    from decflow.contracts.canonical import contract_hash
    from decflow.contracts.loader import LoadedContract
    from decflow.data.records.units import plan_source
    from decflow.pipeline.driver import drive
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.production.summary import CHECK
    from decflow.store.store import Store

    store = Store(f"memory://decflow-check-{uuid.uuid4().hex}")
    loaded = LoadedContract(contract, contract_hash(contract), Path("<contract>"), Path.cwd())
    spec = CheckSpec("", records, store.url, "", plan_source(records), baseline)
    return drive(CHECK, spec, store, loaded=loaded, fail_on_warn=fail_on_warn)
