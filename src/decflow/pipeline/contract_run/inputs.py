"""The `cases` and `requests` stages of a contract run.

`cases` is the golden dataset as a table, keyed by the dataset's bytes; `requests` is every
backend request of the run (originals, transformed cases, reruns, persona arms), keyed by
the cases and the run's mode, seed and properties. Before any call the backend sees every
label presentation the run will send and may refuse it (exit 2).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import polars as pl

from decflow.backends.registry import build_backend
from decflow.data.golden_dataset import load_golden, read_dataset
from decflow.pipeline.contract_run import backend_plan
from decflow.pipeline.contract_run.derive import (
    PART_ROWS,
    PERSONA_PAIRS,
    counterfactual_config,
    derived_requests,
    persona_pair_set,
    persona_settings,
)
from decflow.pipeline.contract_run.first_wave import CASE_COLUMNS, DATASET_READ, dataset_location
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.pipeline.stage import RunContext, Stage
from decflow.store.store import Manifest

# Left in the run's context for the next step in this process (a step run elsewhere reads
# again): the dataset's bytes and hash, from the cases stage's key to its computation
# (`first_wave.DATASET_READ`: a run's first wave may have read them already); the table it
# wrote, for the requests stage (no read back, no hash check of bytes just written).
_CASE_TABLE = "cases table"
# From the requests stage to the call stage: the requests' first part as written, (its
# sha256, the table), so the first shard's requests are not read back from the store
# before the first call (~7 ms for 20k requests; `results.RequestParts`).
REQUESTS_PART = "requests part"


def _dataset_hash(context: RunContext) -> list[str]:
    read_path, shown = dataset_location(context.spec, context.loaded.contract)
    handed = context.outputs.get(DATASET_READ)
    if handed is not None and handed[0] == read_path:
        return [handed[2]]  # the bytes the run's first requests were made of
    raw, digest = read_dataset(read_path, shown_path=shown)
    # the bytes the key is made of, for `_compute_cases` to load (no second read)
    context.outputs[DATASET_READ] = (read_path, raw, digest)
    return [digest]


def _same_path(context: RunContext, cached: Manifest) -> bool:
    """A cached `cases` stage names the dataset by the path it was first read from."""
    context.outputs.pop(DATASET_READ, None)
    context.outputs.pop(CASE_COLUMNS, None)
    return bool(cached.extra.get("path") == dataset_location(context.spec,
                                                              context.loaded.contract)[1])


def _compute_cases(context: RunContext, key: str) -> Manifest:
    contract = context.loaded.contract
    read_path, shown = dataset_location(context.spec, contract)
    handed = context.outputs.pop(DATASET_READ, None)
    read = (handed[1], handed[2]) if handed is not None and handed[0] == read_path else None
    parsed = context.outputs.pop(CASE_COLUMNS, None)
    columns = parsed[1] if read is not None and parsed is not None and parsed[0] == read[1] \
        else None
    dataset = load_golden(read_path, contract.decision.labels, shown_path=shown, read=read,
                          columns=columns)
    extra = {
        "path": shown,
        "hash": dataset.hash,
        "n_cases": dataset.n_cases,
        "n_labeled": dataset.n_labeled,
    }
    manifest = context.store.publish("cases", key, dataset.cases, extra=extra)
    context.outputs[_CASE_TABLE] = (manifest.sha256, dataset.cases)
    return manifest


def _case_table(context: RunContext) -> pl.DataFrame:
    """The cases stage's table: the one it just wrote when it ran in this process and
    context, else read from the store."""
    manifest = context.manifests["cases"]
    handed = context.outputs.pop(_CASE_TABLE, None)
    if handed is not None and handed[0] == manifest.sha256:
        table: pl.DataFrame = handed[1]
        return table
    return context.store.read(manifest)


CASES = Stage("cases", "1", (), _compute_cases, inputs=_dataset_hash, reusable=_same_path,
              restart_input=True, title="read the golden dataset")


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
    ).cast(REQUESTS_SCHEMA)


def check_presentations(context: RunContext, requests: Manifest) -> None:
    """Let the backend refuse label presentations it cannot answer, before any call, and
    store the plan it makes from them with the run (`backend_plan`)."""
    spec, store = context.spec, context.store
    context.outputs.pop(_CASE_TABLE, None)  # left unread when this stage was stored already
    backend = build_backend(context.loaded.contract, spec.backend)
    if not backend.makes_plans():
        return  # the default hooks accept every presentation: no need to read them
    if backend_plan.stored_plan(store, spec.run_id) is not None:
        return  # a resumed run keeps the plan its earlier results were read with
    shown: set[tuple[str, ...]] = set()
    for part in requests.parts:
        labels = store.read_part(part, ["shown_labels"])["shown_labels"]
        shown.update(tuple(s) for s in labels.unique().to_list())
    backend_plan.prepare(backend, store, spec.run_id, sorted(shown))


def _request_params(context: RunContext) -> dict[str, Any]:
    spec = context.spec
    params = {"mode": spec.mode, "seed": spec.seed, "properties": spec.properties}
    # Only when set, so the keys of runs without an override stay what they were.
    return params if spec.repeats is None else {**params, "repeats": spec.repeats}


def _compute_requests(context: RunContext, key: str) -> Manifest:
    store, loaded = context.store, context.loaded
    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    case_table = _case_table(context)
    config = counterfactual_config(context.spec, contract)
    pairs = None if config is None else persona_pair_set(contract, config, case_table)
    derived, extra = derived_requests(context.spec, loaded, case_table, pairs)
    if config is not None and pairs is not None:
        # The summary reads the pairs back from here instead of drawing them again (their
        # storage loads only for a contract that declares persona pairs).
        from decflow.diagnostics.pair_storage import pair_meta, pair_table

        stored = store.publish(PERSONA_PAIRS, key, pair_table(pairs))
        extra[PERSONA_PAIRS] = {"manifest": stored.to_dict(), "meta": pair_meta(pairs),
                                "settings": persona_settings(contract, config)}
    # publish writes each frame as a part as it is generated and reads `extra` only after
    # the last one, when the generators have filled it in.
    frames = itertools.chain([original_requests(case_table, labels)], derived)
    first: list[pl.DataFrame] = []
    manifest = store.publish("requests", key, _first_kept(_coalesced(frames, PART_ROWS), first),
                             extra=extra)
    if first:
        context.outputs[REQUESTS_PART] = (manifest.parts[0].sha256, first[0])
    return manifest


REQUESTS = Stage("requests", "1", ("cases",), _compute_requests, params=_request_params,
                 validate=check_presentations, restart_input=True,
                 title="build the requests to send")


def _first_kept(frames: Iterable[pl.DataFrame], first: list[pl.DataFrame]
                ) -> Iterator[pl.DataFrame]:
    """`frames`, the first of them also put in `first` (for the call stage:
    `REQUESTS_PART`)."""
    for frame in frames:
        if not first:
            first.append(frame)
        yield frame


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
