"""Production-check tasks: the stages `records` → `aggregates` → `summary` exchanging
manifests through the store exactly as `decflow check --store` runs them
(`decflow.pipeline.production`)."""

from __future__ import annotations

from typing import Any

from decflow.pipeline.production.run import summarize_and_record
from decflow.pipeline.production.stages import stage_aggregates, stage_records
from decflow.pipeline.spec import load_contract_cached
from decflow.store.runs import report_path
from decflow.store.store import Manifest, Store
from decflow.tasks.common import outcome, stage_task


@stage_task("records")
def records_task(contract: str, records: str, store_url: str) -> dict[str, Any]:
    loaded = load_contract_cached(contract)
    manifest = stage_records(Store(store_url), loaded.contract, loaded.hash, records)
    return manifest.to_dict()


@stage_task("aggregates")
def aggregates_task(contract: str, store_url: str, records: dict[str, Any]) -> dict[str, Any]:
    loaded = load_contract_cached(contract)
    manifest = stage_aggregates(Store(store_url), loaded.contract, loaded.hash,
                                Manifest.from_dict(records))
    return manifest.to_dict()


@stage_task("summary")
def check_summary_task(
    contract: str, records_path: str, baseline: str | None, store_url: str, run_id: str,
    records: dict[str, Any], aggregates: dict[str, Any], fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Merge the statistics, judge drift and gates; the report is stored as run `run_id`."""
    report = summarize_and_record(
        Store(store_url), contract, records_path, baseline, run_id,
        Manifest.from_dict(records), Manifest.from_dict(aggregates), fail_on_warn=fail_on_warn,
    )
    return outcome(report, report_path(run_id))
