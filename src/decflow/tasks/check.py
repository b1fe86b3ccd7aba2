"""Production-check and regression tasks.

`decflow.pipeline.check` runs `records` → `aggregates` as one streaming pass over the
partitions (it keeps one batch in memory and detects duplicate ids across partitions), so
the check is one task for those stages plus `summary`; the report is stored like a run's.
"""

from __future__ import annotations

from typing import Any

from decflow.store.store import Store
from decflow.tasks.common import stage_task


@stage_task("check")
def check_task(
    contract: str, records: str, baseline: str | None, fail_on_warn: bool = False
) -> dict[str, Any]:
    """records → aggregates → summary of a production check; returns the check report."""
    from decflow.commands.check import run_check

    return run_check(contract, records, baseline, fail_on_warn=fail_on_warn)


@stage_task("diff")
def diff_task(
    baseline_run: str, candidate_run: str, contract: str, store_url: str,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The regression diff of two stored runs, written as `runs/<candidate>/diff.json`."""
    from decflow.commands.diff import run_diff

    diff = run_diff(baseline_run, candidate_run, contract_path=contract, store=store_url,
                    fail_on_warn=fail_on_warn)
    Store(store_url).write_json(f"runs/{candidate_run}/diff.json", diff)
    return diff


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
