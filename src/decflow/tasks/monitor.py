"""The monitor's own task (`production_monitor` flow): its plan, made where the flow runs
(the monitor's lock held), by listing the source and labels and planning only the
partitions not read before. Its stages run as the generic stage loop's tasks."""

from __future__ import annotations

from typing import Any

from decflow.pipeline.monitor.spec import plan_monitor
from decflow.store.store import Store
from decflow.tasks.common import stage_task


@stage_task("monitor-plan", "monitor-plan: list the source, plan what is new")
def monitor_plan_task(contract: str, records: str, store: str, run_id: str,
                      labels: str | None, baseline: str | None) -> dict[str, Any]:
    """The monitor run's spec (small JSON; local files by absolute path, for workers)."""
    return plan_monitor(contract, records, Store(store), run_id, labels=labels,
                        baseline=baseline, absolute=True).to_dict()
