"""A monitor run from start to end: under the monitor's lock, list and plan (only the
partitions not read before are hashed and split), then the monitor's pipeline (`MONITOR`:
`partitions` with its `records` units read on all cores, `labels`, then the verdict stage
`monitor`) through the one driver, as the `production_monitor` flow runs it through the
generic stage loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decflow.pipeline.driver import drive
from decflow.pipeline.monitor.judge import JUDGE
from decflow.pipeline.monitor.spec import BACKEND, MonitorSpec, monitor_of, plan_monitor
from decflow.pipeline.monitor.stages import LABELS, PARTITIONS, unit_of, windowed_stats
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.production.workers import units_reader
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import Progress
from decflow.report.monitor_report import MONITOR_KIND
from decflow.store.monitors import monitor_lock
from decflow.store.runs import new_run_id
from decflow.store.store import Manifest, Store, open_store


def describe_monitor(spec: MonitorSpec, _manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    """What a monitor run's record says of it besides the driver's fields."""
    return {"kind": MONITOR_KIND, "dataset_hash": spec.plan.hash if spec.plan.files else None,
            "backend": BACKEND, "mode": MONITOR_KIND, "monitor": spec.monitor_id}


MONITOR: Pipeline[MonitorSpec] = Pipeline(
    MONITOR_KIND, f"{__name__}:MONITOR", MonitorSpec.from_dict, (PARTITIONS, LABELS, JUDGE),
    "decflow.report.monitor_report:MonitorReport", describe_monitor,
    local_units=units_reader(windowed_stats, unit_of))


def run_monitor(contract_path: str, source: str, *, labels: str | None = None,
                baseline: str | None = None, store: Store | str | None = None,
                progress: Progress | None = None) -> dict[str, Any]:
    """Check what is new in `source` (and `labels`) for the contract's decision; returns
    the monitor report. Raises `DecflowError` (exit 2) when it cannot run."""
    opened = open_store(store)
    loaded = load_contract_cached(contract_path)
    with monitor_lock(opened, monitor_of(contract_path, source)):
        spec = plan_monitor(contract_path, source, opened, new_run_id(), labels=labels,
                            baseline=baseline)
        return drive(MONITOR, spec, opened, loaded=loaded,
                     progress=None if progress is None else (lambda _n, _t: progress))
