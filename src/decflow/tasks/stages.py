"""Contract-run tasks: one per stage, one per shard of backend calls.

Each takes the run's `RunSpec` as a dict and upstream manifests as dicts, calls the pure
stage function from `decflow.pipeline`, and returns a manifest dict.
"""

from __future__ import annotations

from typing import Any

from decflow.errors import DecflowError
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.inputs import stage_cases, stage_requests
from decflow.pipeline.contract_run.runner import finish_run, run_dir
from decflow.store.store import Manifest, Store
from decflow.tasks.common import (
    SHARD_RETRIES,
    manifests_of,
    outcome,
    spec_and_store,
    stage_task,
)

Spec = dict[str, Any]
ManifestDict = dict[str, Any]


@stage_task("cases")
def cases_task(spec: Spec) -> ManifestDict:
    run_spec, store = spec_and_store(spec)
    return stage_cases(run_spec, store).to_dict()


@stage_task("requests")
def requests_task(spec: Spec, cases: ManifestDict) -> ManifestDict:
    run_spec, store = spec_and_store(spec)
    return stage_requests(run_spec, store, Manifest.from_dict(cases)).to_dict()


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


@stage_task("comparisons")
def comparisons_task(spec: Spec, manifests: dict[str, ManifestDict]) -> ManifestDict:
    from decflow.pipeline.contract_run.comparisons import stage_comparisons

    run_spec, store = spec_and_store(spec)
    return stage_comparisons(run_spec, store, manifests_of(manifests)).to_dict()


@stage_task("minimized")
def minimized_task(spec: Spec, manifests: dict[str, ManifestDict]) -> ManifestDict:
    from decflow.pipeline.contract_run.comparisons import stage_minimized

    run_spec, store = spec_and_store(spec)
    return stage_minimized(run_spec, store, manifests_of(manifests)).to_dict()


@stage_task("summary")
def summary_task(
    spec: Spec,
    manifests: dict[str, ManifestDict],
    timings: dict[str, float],
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Metrics, checks and the report; writes `runs/<id>/report.json` and the run record.
    Returns the report's status, exit code and store path."""
    run_spec, store = spec_and_store(spec)
    report = finish_run(run_spec, store, manifests_of(manifests), timings,
                        fail_on_warn=fail_on_warn)
    return outcome(report, f"{run_dir(run_spec.run_id)}/report.json")
