"""Stage functions: pure functions of a `RunSpec` and upstream manifests.

Each reads its inputs from the store, writes its output artifact, and returns a small
`Manifest`. A stage whose key already has a published manifest is a cache hit, except the
call stage, which is keyed by run id so a fresh run always calls the model.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import polars as pl

from decflow.backends.registry import build_backend
from decflow.data.golden import load_golden
from decflow.errors import DecflowError
from decflow.pipeline import run_plan
from decflow.pipeline.derive import PART_ROWS, derived_requests
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
    return cases.select(
        pl.col("case_id").alias("request_id"),
        "case_id",
        property=pl.lit(""),
        sample=pl.lit(0, dtype=pl.Int64),
        input_text="input_text",
        input_json="input_json",
        shown_labels=pl.lit(list(labels), dtype=pl.List(pl.String)),
        label_order=pl.lit(list(range(len(labels))), dtype=pl.List(pl.Int64)),
        steps_json=pl.lit(None, dtype=pl.String),
        pre_error_kind=pl.lit(None, dtype=pl.String),
        pre_error_message=pl.lit(None, dtype=pl.String),
    ).cast(REQUESTS_SCHEMA)  # type: ignore[arg-type]


def check_presentations(spec: RunSpec, store: Store, requests: Manifest) -> None:
    """Let the backend refuse label presentations it cannot answer, before any call, and
    store the plan it makes from them with the run (`pipeline.run_plan`)."""
    contract = load_contract_cached(spec.contract_path).contract
    backend = build_backend(contract, spec.backend)
    if not run_plan.makes_plans(backend):
        return  # the default hooks accept every presentation: no need to read them
    if run_plan.stored_plan(store, spec.run_id) is not None:
        return  # a resumed run keeps the plan its earlier results were read with
    shown: set[tuple[str, ...]] = set()
    for part in requests.parts:
        labels = store.read_part(part, ["shown_labels"])["shown_labels"].unique().to_list()
        shown.update(tuple(s) for s in labels)
    run_plan.prepare(backend, store, spec.run_id, sorted(shown))


def stage_requests(spec: RunSpec, store: Store, cases: Manifest) -> Manifest:
    manifest = _requests_manifest(spec, store, cases)
    check_presentations(spec, store, manifest)
    return manifest


def _requests_manifest(spec: RunSpec, store: Store, cases: Manifest) -> Manifest:
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
    derived, extra = derived_requests(spec, loaded, case_table)
    # publish writes each frame as a part as it is generated and reads `extra` only after
    # the last one, when the generators have filled it in.
    frames = itertools.chain([original_requests(case_table, labels)], derived)
    return store.publish("requests", key, _coalesced(frames, PART_ROWS), extra=extra)


def _coalesced(frames: Iterable[pl.DataFrame], rows: int) -> Iterator[pl.DataFrame]:
    """Consecutive frames concatenated into parts of at least `rows` rows (the last may be
    smaller): few, evenly sized parts, and a small run stays a single part."""
    pending: list[pl.DataFrame] = []
    size = 0
    for frame in frames:
        pending.append(frame)
        size += frame.height
        if size >= rows:
            yield pl.concat(pending, how="vertical")
            pending, size = [], 0
    if pending:
        yield pl.concat(pending, how="vertical")
