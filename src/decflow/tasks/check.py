"""Production-check and regression tasks.

The production check's stages as tasks, exchanging manifests through the store exactly
as `decflow check --store` runs them: `records-plan` (hash, count and split the inputs)
→ `records` mapped over the units (each validates its files or row groups into mergeable
statistics and id hashes) → `aggregates` (ids across units, merged statistics) →
`summary` (drift against the baseline, gates, segments; stored as a run) → `report`.
"""

from __future__ import annotations

from typing import Any

from decflow.pipeline.spec import load_contract_cached, now_iso
from decflow.store.store import Manifest, Store
from decflow.tasks.common import outcome, stage_task


@stage_task("records-plan")
def plan_task(records: str) -> dict[str, Any]:
    """Hash and count the record files and split them into units (small JSON)."""
    from decflow.pipeline.check import plan_source

    return plan_source(records, absolute=True).to_dict()


@stage_task("records", run_name="records-{unit[index]}")
def unit_task(contract: str, store_url: str, unit: dict[str, Any]) -> dict[str, Any]:
    """The `records` stage of one unit: only its files or row groups are read here."""
    from decflow.data.record_units import Unit
    from decflow.pipeline.check import stage_unit

    loaded = load_contract_cached(contract)
    return stage_unit(Unit.from_dict(unit), store_url, loaded.contract, loaded.hash)


@stage_task("aggregates")
def aggregates_task(
    contract: str, store_url: str, plan: dict[str, Any], outcomes: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ids across all units, then the merged statistics."""
    from decflow.pipeline.check import SourcePlan, stage_aggregates

    loaded = load_contract_cached(contract)
    manifest = stage_aggregates(Store(store_url), loaded.contract, loaded.hash,
                                SourcePlan.from_dict(plan), outcomes)
    return manifest.to_dict()


@stage_task("summary")
def check_summary_task(
    contract: str, records_path: str, baseline: str | None, store_url: str, run_id: str,
    aggregates: dict[str, Any], fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Merge the statistics, judge drift and gates; the report is stored as run `run_id`."""
    from decflow.pipeline.check import load_baseline, stored_aggregates, summarize

    loaded = load_contract_cached(contract)
    store = Store(store_url)
    merged = stored_aggregates(store, loaded.contract, Manifest.from_dict(aggregates),
                               shown_path=records_path)
    report = summarize(
        loaded.contract, merged,
        None if baseline is None else load_baseline(loaded.contract, baseline),
        contract_path=contract, contract_hash=loaded.hash, fail_on_warn=fail_on_warn,
    )
    record_check(store, run_id, report)
    return outcome(report, f"runs/{run_id}/report.json")


def record_check(store: Store, run_id: str, report: dict[str, Any]) -> None:
    """The check report and a run record in the shape `decflow runs` lists."""
    store.write_json(f"runs/{run_id}/report.json", report)
    store.write_json(f"runs/{run_id}/run.json", {
        "run_id": run_id,
        "kind": "check",
        "decision": report["contract"]["name"],
        "contract_hash": report["contract"]["hash"],
        "dataset_hash": report["dataset"]["hash"],
        "backend": "records",
        "mode": "check",
        "status": report["status"],
        "exit_code": report["exit_code"],
        "stages": {},
        "updated_at": now_iso(),
    })


@stage_task("diff")
def diff_task(
    baseline_run: str, candidate_run: str, contract: str, store_url: str,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The regression diff of two stored runs, written as `runs/<candidate>/diff.json`."""
    from decflow.commands.diff import run_diff

    diff = run_diff(baseline_run, candidate_run, contract_path=contract, store=store_url,
                    fail_on_warn=fail_on_warn)
    relative = f"runs/{candidate_run}/diff.json"
    Store(store_url).write_json(relative, diff)
    return outcome(diff, relative)


@stage_task("replay")
def replay_task(
    target: str, store_url: str, ids: list[str], contract: str | None, backend: str | None,
    max_concurrency: int | None,
) -> dict[str, Any]:
    """Re-send a stored run's property failures (a report file or a run id in the store)."""
    from decflow.commands.report import load_verified
    from decflow.contracts import load_contract
    from decflow.pipeline.replay import replay_report, stored_contract

    report, source, _ = load_verified(target, Store(store_url))
    loaded = load_contract(contract or stored_contract(report) or report["contract"]["path"])
    return replay_report(report, loaded, source=source, backend=backend, ids=ids,
                         max_concurrency=max_concurrency)
