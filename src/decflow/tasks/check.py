"""Production-check and regression tasks.

`decflow.pipeline.check` runs `records` → `aggregates` as one streaming pass over the
partitions (it keeps one batch in memory and detects duplicate ids across partitions), so
the check is one task for those stages plus `summary`; the report is stored like a run's.
"""

from __future__ import annotations

from typing import Any

from decflow.pipeline.spec import now_iso
from decflow.store.store import Store
from decflow.tasks.common import outcome, stage_task


@stage_task("check")
def check_task(
    contract: str, records: str, baseline: str | None, store_url: str, run_id: str,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """records → aggregates → summary of a production check, stored as run `run_id`."""
    from decflow.commands.check import run_check

    report = run_check(contract, records, baseline, fail_on_warn=fail_on_warn)
    record_check(Store(store_url), run_id, report)
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
