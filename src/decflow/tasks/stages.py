"""Contract-run tasks: one per stage, one per shard of backend calls.

Every stage task runs the pipeline's own `Stage` through `run_stage` (key, cache lookup,
compute, manifest), so a stage computes exactly as in the in-process runner. Tasks take the
run's `RunSpec` as a dict and upstream manifests as dicts, and return a manifest dict. The
call stage runs in the flow itself (`flows.contract_run`), which submits its shards as
`results-shard` tasks around the `results-health`, `results-check-originals` and `results`
(publish) steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import get_run_logger

from decflow.errors import DecflowError
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.runner import STAGE_BY_NAME
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import StageContext, run_stage
from decflow.store.store import Manifest, Store
from decflow.tasks.common import SHARD_RETRIES, manifests_of, spec_and_store, stage_task

Spec = dict[str, Any]
ManifestDict = dict[str, Any]


def _stage_task(name: str) -> Any:
    def compute(spec: Spec, manifests: dict[str, ManifestDict],
                fail_on_warn: bool = False) -> ManifestDict:
        run_spec, store = spec_and_store(spec)
        context = StageContext(run_spec, store, load_contract_cached(run_spec.contract_path),
                               manifests_of(manifests), fail_on_warn=fail_on_warn,
                               logger=get_run_logger())
        return run_stage(STAGE_BY_NAME[name], context).to_dict()

    compute.__name__ = compute.__qualname__ = f"{name}_task"
    return stage_task(name)(compute)


# One task per stage besides the call stage, named after it (the names Prefect shows).
STAGE_TASKS: dict[str, Callable[..., ManifestDict]] = {
    name: _stage_task(name) for name, stage in STAGE_BY_NAME.items() if not stage.sharded
}


@stage_task("results-health")
def health_task(spec: Spec) -> dict[str, str] | None:
    run_spec, _ = spec_and_store(spec)
    return results_stage.prepare_calls(run_spec)


# The call-stage steps take the requests stage's key (a small string, cheap to ship to a
# Dask worker) and read its manifest from the store.


def _requests(store: Store, key: str) -> Manifest:
    manifest = store.manifest("requests", key)
    if manifest is None:
        raise DecflowError(f"store {store.url}: no published requests stage {key}")
    return manifest


@stage_task("results-shard", retries=SHARD_RETRIES, run_name="results-{phase}-{index}")
def shard_task(spec: Spec, requests_key: str, key: str, phase: str, index: int) -> int:
    """One shard of backend calls; a retry re-sends only requests without a recorded result."""
    run_spec, store = spec_and_store(spec)
    return results_stage.call_shard(
        run_spec, store, _requests(store, requests_key), key, phase, index
    )


@stage_task("results-check-originals")
def originals_task(spec: Spec, requests_key: str, key: str) -> None:
    run_spec, store = spec_and_store(spec)
    results_stage.check_originals(run_spec, store, _requests(store, requests_key), key)


@stage_task("results")
def finish_results_task(
    spec: Spec, requests_key: str, key: str, health: dict[str, str] | None
) -> ManifestDict:
    run_spec, store = spec_and_store(spec)
    manifest = results_stage.finish_results(
        run_spec, store, _requests(store, requests_key), key, health
    )
    return manifest.to_dict()
