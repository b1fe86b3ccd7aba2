"""A production check from start to end in this process: load the contract, plan the input
into units, then the stages `aggregates` (its `records` units read on all cores) and
`summary`, through `run_stage` as the `production_check` flow runs them, so a direct check
and a Prefect one store the same things (`runs/<run_id>/` plus the units' statistics and
id hashes; never a copy of the records)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from decflow.data.record_units import Scanned, scan_in_background
from decflow.data.scan_process import scan_beside, worth_a_process

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.stage import Progress, StageContext, UnitRunner
    from decflow.store.store import Store

# Light on purpose (the store, polars and the contract models are imported where they are
# used): a check starts hashing its input first, and the hash overlaps those imports.
Scanning = Callable[[], Scanned]


_scans_ahead: dict[str, Scanning] = {}
log = logging.getLogger("decflow")


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
    (records, an earlier check report or a check run). The stages are published in `store`
    (default `$DECFLOW_STORE`, else `.decflow`), cached by contract and input bytes, and the
    check is recorded as a run there. `scanning`: `start_scan(records)`, started earlier.
    Returns the report; raises `DecflowError` (exit 2) on bad input."""
    scanned = scanning or start_scan(records)
    from decflow.data.record_units import plan_scanned
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.production.workers import read_units
    from decflow.pipeline.spec import load_contract_cached
    from decflow.store.runs import new_run_id
    from decflow.store.store import open_store

    loaded = load_contract_cached(contract_path)
    opened = open_store(store)
    spec = CheckSpec(contract_path, records, opened.location, new_run_id(),
                     plan_scanned(records, *scanned()), baseline)
    return checked(check_context(spec, opened, loaded, read_units, progress=progress,
                                 fail_on_warn=fail_on_warn))


def check_context(
    spec: CheckSpec, store: Store, loaded: LoadedContract, units: UnitRunner, *,
    progress: Progress | None = None, fail_on_warn: bool = False, logger: Any = log,
) -> StageContext[CheckSpec]:
    """The context a check's stages run in; `units` reads the units not found stored."""
    from decflow.pipeline.stage import StageContext

    return StageContext(spec, store, loaded, {}, fail_on_warn=fail_on_warn, logger=logger,
                        units=units, progress=None if progress is None
                        else (lambda _name, _total: progress))


def checked(context: StageContext[CheckSpec]) -> dict[str, Any]:
    """The check's stages in this process (`aggregates`, then `summary`); its report."""
    from decflow.pipeline.production.stages import AGGREGATES
    from decflow.pipeline.production.summary import SUMMARY
    from decflow.pipeline.stage import run_stage

    manifests = dict(context.manifests)
    for stage in (AGGREGATES, SUMMARY):
        manifests[stage.name] = run_stage(stage, replace(context, manifests=manifests))
    report: dict[str, Any] = context.outputs["report"]
    return report


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
    from decflow.data.record_units import plan_source
    from decflow.pipeline.production.stages import CheckSpec
    from decflow.pipeline.production.workers import read_units
    from decflow.store.store import Store

    store = Store(f"memory://decflow-check-{uuid.uuid4().hex}")
    loaded = LoadedContract(contract, contract_hash(contract), Path("<contract>"), Path.cwd())
    spec = CheckSpec("", records, store.url, "", plan_source(records), baseline)
    return checked(check_context(spec, store, loaded, read_units, fail_on_warn=fail_on_warn))
