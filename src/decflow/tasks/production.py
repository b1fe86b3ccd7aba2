"""Production-check tasks: the stages exchanging manifests through the store exactly as a
direct `decflow check` runs them (`decflow.pipeline.production`): `records-plan` (hash,
count and split the inputs) → `records` mapped over the units (each validates its files or
row groups into mergeable statistics and id hashes) → `aggregates` (ids across units,
merged statistics) → `summary` (drift against the baseline, gates, segments; stored as a
run) → `report`."""

from __future__ import annotations

from typing import Any

from prefect.runtime import task_run

from decflow.data.record_units import Unit
from decflow.pipeline.production.run import summarize_and_record
from decflow.pipeline.production.stages import stage_aggregates, stage_unit
from decflow.pipeline.production.units import SourcePlan, plan_source
from decflow.pipeline.spec import load_contract_cached
from decflow.store.runs import report_path
from decflow.store.store import Manifest, Store
from decflow.tasks.common import outcome, stage_task


@stage_task("records-plan", "records-plan: hash, count and split the records")
def plan_task(records: str) -> dict[str, Any]:
    """Hash and count the record files and split them into units (small JSON)."""
    return plan_source(records, absolute=True).to_dict()


def _unit_run_name() -> str:
    unit = task_run.parameters["unit"]
    return f"records: read unit {unit['index'] + 1} ({unit['n_records']} records)"


@stage_task("records", _unit_run_name)
def unit_task(contract: str, store_url: str, unit: dict[str, Any]) -> dict[str, Any]:
    """The `records` stage of one unit: only its files or row groups are read here."""
    loaded = load_contract_cached(contract)
    return stage_unit(Unit.from_dict(unit), store_url, loaded.contract, loaded.hash)


@stage_task("aggregates", "aggregates: merge the units' statistics and ids")
def aggregates_task(
    contract: str, store_url: str, plan: dict[str, Any], outcomes: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ids across all units, then the merged statistics."""
    loaded = load_contract_cached(contract)
    manifest = stage_aggregates(Store(store_url), loaded.contract, loaded.hash,
                                SourcePlan.from_dict(plan), outcomes)
    return manifest.to_dict()


@stage_task("summary", "summary: judge drift and gates, write the report")
def check_summary_task(
    contract: str, records_path: str, baseline: str | None, store_url: str, run_id: str,
    aggregates: dict[str, Any], fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Merge the statistics, judge drift and gates; the report is stored as run `run_id`."""
    report = summarize_and_record(
        Store(store_url), contract, records_path, baseline, run_id,
        Manifest.from_dict(aggregates), fail_on_warn=fail_on_warn,
    )
    return outcome(report, report_path(run_id))
