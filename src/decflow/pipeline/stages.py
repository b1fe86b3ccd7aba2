"""Stage functions: pure functions of a `RunSpec` and upstream manifests.

Each reads its inputs from the store, writes its output artifact, and returns a small
`Manifest`. A stage whose key already has a published manifest is a cache hit, except the
call stage, which is keyed by run id so a fresh run always calls the model.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import polars as pl

from decflow.backends.registry import build_backend, decision_spec
from decflow.data.golden import load_golden
from decflow.errors import DecflowError
from decflow.pipeline.calls import (
    ChunkSink,
    decide_requests,
    generation_error_rows,
    original_error_rows,
    recorded_request_ids,
)
from decflow.pipeline.derive import derived_requests
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.store.store import Manifest, Store, stage_key

log = logging.getLogger("decflow")
STAGE_VERSIONS = {
    "cases": "1",
    "requests": "1",
    "results": "1",
    "comparisons": "1",
    "minimized": "1",
    "summary": "1",
}
ProgressFactory = Callable[[str, int], Callable[[int, int], None]]


def _cached(store: Store, stage: str, key: str) -> Manifest | None:
    manifest = store.manifest(stage, key)
    if manifest is not None:
        log.info("stage %s: cache hit (%s)", stage, key[:12])
    return manifest


def dataset_location(spec: RunSpec, contract: Any) -> tuple[str, str]:
    """(path to read, path as shown in reports) for the golden dataset."""
    if spec.dataset is not None:
        return spec.dataset, spec.dataset
    if contract.dataset is None:
        raise DecflowError(
            "no dataset given; set 'dataset' in the contract or pass --dataset"
        )
    shown = os.path.join(os.path.dirname(spec.contract_path), contract.dataset)
    return shown, shown


def stage_cases(spec: RunSpec, store: Store) -> Manifest:
    loaded = load_contract_cached(spec.contract_path)
    contract = loaded.contract
    read_path, shown = dataset_location(spec, contract)
    dataset = load_golden(read_path, contract.decision.labels, shown_path=shown)
    key = stage_key("cases", STAGE_VERSIONS["cases"], loaded.hash, [dataset.hash], {})
    extra = {
        "path": shown,
        "hash": dataset.hash,
        "n_cases": dataset.n_cases,
        "n_labeled": dataset.n_labeled,
    }
    cached = _cached(store, "cases", key)
    if cached is not None and cached.extra == extra:
        return cached
    return store.publish("cases", key, dataset.cases, extra=extra)


def original_requests(cases: pl.DataFrame, labels: tuple[str, ...]) -> pl.DataFrame:
    """One request per case with the canonical presentation; request id = case id."""
    n = cases.height
    return pl.DataFrame(
        {
            "request_id": cases["case_id"],
            "case_id": cases["case_id"],
            "property": [""] * n,
            "sample": [0] * n,
            "input_text": cases["input_text"],
            "input_json": cases["input_json"],
            "shown_labels": [list(labels)] * n,
            "label_order": [list(range(len(labels)))] * n,
            "steps_json": [None] * n,
            "pre_error_kind": [None] * n,
            "pre_error_message": [None] * n,
        },
        schema=REQUESTS_SCHEMA,
    )


def stage_requests(spec: RunSpec, store: Store, cases: Manifest) -> Manifest:
    loaded = load_contract_cached(spec.contract_path)
    labels = tuple(loaded.contract.decision.labels)
    params = {"mode": spec.mode, "seed": spec.seed, "properties": spec.properties}
    key = stage_key(
        "requests", STAGE_VERSIONS["requests"], loaded.hash, [cases.sha256], params
    )
    cached = _cached(store, "requests", key)
    if cached is not None:
        return cached
    case_table = store.read(cases)
    frames = [original_requests(case_table, labels)]
    derived, extra = derived_requests(spec, loaded, case_table)
    frames.extend(derived)
    return store.publish("requests", key, pl.concat(frames, how="vertical"), extra=extra)


async def _health(backend: Any, enabled: bool) -> dict[str, str] | None:
    if not enabled:
        return None
    health = await backend.healthcheck()
    if health.status == "unhealthy":
        raise DecflowError(f"backend '{backend.name}' is unhealthy: {health.detail}")
    return {"status": health.status, "detail": health.detail}


def stage_results(
    spec: RunSpec,
    store: Store,
    requests: Manifest,
    progress: ProgressFactory | None = None,
) -> Manifest:
    """Call the backend for every request without a recorded result in this run."""
    loaded = load_contract_cached(spec.contract_path)
    contract = loaded.contract
    params = {"run_id": spec.run_id, "backend": spec.backend}
    key = stage_key("results", STAGE_VERSIONS["results"], loaded.hash, [requests.sha256], params)
    cached = _cached(store, "results", key)
    if cached is not None:
        return cached
    all_requests = store.read(requests)
    prefix = store.stage_prefix("results", key)
    parts = store.chunk_parts("results", key)
    recorded = recorded_request_ids(store, parts)
    if recorded:
        log.info("stage results: resuming, %d of %d results already recorded",
                 len(recorded), all_requests.height)
    sink = ChunkSink(store, prefix, parts)
    backend = build_backend(contract, spec.backend)
    spec_decision = decision_spec(contract)
    tolerance = contract.evaluation.probability_tolerance
    concurrency = spec.max_concurrency or contract.evaluation.max_concurrency
    health = asyncio.run(
        _run_calls(spec, store, backend, spec_decision, all_requests, recorded, sink,
                   tolerance, concurrency, progress)
    )
    extra = {
        "backend": {
            "name": spec.backend,
            "provider": backend.provider,
            "model": backend.model,
            "details": backend.details(),
        },
        "health": health,
    }
    return store.publish("results", key, [], parts=sink.parts, extra=extra,
                         schema={k: str(v) for k, v in _results_schema().items()})


def _results_schema() -> dict[str, Any]:
    from decflow.backends.engine import RESULTS_SCHEMA

    return RESULTS_SCHEMA


async def _run_calls(
    spec: RunSpec,
    store: Store,
    backend: Any,
    decision: Any,
    requests: pl.DataFrame,
    recorded: set[str],
    sink: ChunkSink,
    tolerance: float,
    concurrency: int,
    progress: ProgressFactory | None,
) -> dict[str, str] | None:
    try:
        health = await _health(backend, spec.healthcheck)
        pending = requests.filter(~pl.col("request_id").is_in(list(recorded)))
        originals = pending.filter(pl.col("property") == "")
        transformed = pending.filter(pl.col("property") != "")
        update = progress("calls", pending.height) if progress else None

        def report_originals(done: int, _total: int) -> None:
            if update:
                update(done, pending.height)

        def report_transformed(done: int, _total: int) -> None:
            if update:
                update(originals.height + done, pending.height)

        await decide_requests(backend, originals, decision=decision, tolerance=tolerance,
                              max_concurrency=concurrency, shard_size=spec.shard_size,
                              sink=sink, progress=report_originals)
        failed = _failed_originals(store, sink, requests, backend.name)
        if transformed.height:
            sink(generation_error_rows(transformed))
            transformed = transformed.filter(pl.col("pre_error_kind").is_null())
            blocked = original_error_rows(transformed, failed)
            sink(blocked)
            rest = transformed.join(blocked.select("request_id"), on="request_id", how="anti")
            await decide_requests(backend, rest, decision=decision, tolerance=tolerance,
                                  max_concurrency=concurrency, shard_size=spec.shard_size,
                                  sink=sink, progress=report_transformed)
        return health
    finally:
        await backend.aclose()


def _failed_originals(
    store: Store, sink: ChunkSink, requests: pl.DataFrame, backend_name: str
) -> pl.DataFrame:
    """Originals that errored; abort when every case errored (the check cannot run)."""
    originals = requests.filter(pl.col("property") == "").select("request_id", "case_id")
    results = pl.concat(
        [store.read_part(p, ["request_id", "error_kind", "error_message"]) for p in sink.parts],
        how="vertical",
    ) if sink.parts else pl.DataFrame(
        schema={"request_id": pl.String, "error_kind": pl.String, "error_message": pl.String}
    )
    joined = originals.join(results, on="request_id", how="left")
    failed = joined.filter(pl.col("error_kind").is_not_null())
    if joined.height and failed.height == joined.height:
        first = failed.row(0, named=True)
        raise DecflowError(
            f"backend '{backend_name}' failed on every case; first error: "
            f"{first['error_kind']}: {first['error_message']}"
        )
    return failed.select("case_id", "error_kind")

