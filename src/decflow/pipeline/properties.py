"""Property stages: `comparisons` (distances of every transformed case from its original),
`minimized` (greedy shrinking of failing cases) and the report's `properties` section.

Comparisons store raw distances; violations are judged again with the contract at hand when
the report is built, so re-gating a stored run with new limits needs no backend call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl

from decflow.data.golden import case_input
from decflow.metrics.compare import Comparison, Limits, compare, judge
from decflow.pipeline.derive import DIAGNOSTIC_PROPERTIES
from decflow.pipeline.direct_calls import CandidateDecider
from decflow.pipeline.golden import probability_matrix
from decflow.pipeline.run_plan import run_backend
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.properties.generate import RELATIONS
from decflow.properties.minimize import ShrinkJob, make_judge, minimize_many
from decflow.store.store import Manifest, Store, stage_key

COMPARISON_COLUMNS = {
    "request_id": pl.String,
    "case_id": pl.String,
    "property": pl.String,
    "tv": pl.Float64,
    "js": pl.Float64,
    "max_abs_delta": pl.Float64,
    "confidence_delta": pl.Float64,
    "selected_before": pl.Int64,
    "selected_after": pl.Int64,
    "flipped": pl.Boolean,
    "rank_changed": pl.Boolean,
    "level_delta": pl.Float64,
}
MAX_LISTED_FAILURES = 200


def _direction(config: Any) -> str:
    return getattr(config, "direction", "increasing") or "increasing"


def joined_transformed(
    store: Store,
    manifests: dict[str, Manifest],
    *,
    requests: Sequence[str] | None = None,
    results: Sequence[str] | None = None,
    original_inputs: bool = True,
    probabilities: bool = True,
    where: pl.Expr | None = None,
) -> pl.DataFrame:
    """Transformed property requests with their result, their original's input and
    probabilities.

    `requests` / `results` name the columns wanted besides request_id, case_id, property and
    probabilities (default: all), `original_inputs=False` leaves out the original's text and
    JSON, `probabilities=False` both probability columns, and `where` keeps only the
    requests it matches; requests are filtered part by part, so only the wanted rows and
    columns are ever held.
    """
    # Reruns and persona arms are judged by the diagnostics section, not as properties.
    metamorphic = (pl.col("property") != "") & ~pl.col("property").is_in(DIAGNOSTIC_PROPERTIES)
    wanted = metamorphic if where is None else metamorphic & where
    inputs = ["input_text", "input_json"] if original_inputs else []
    request_columns = None if requests is None else list(
        dict.fromkeys(["request_id", "case_id", "property", *requests])
    )
    read_columns = None if request_columns is None else list(
        dict.fromkeys([*request_columns, *inputs])
    )
    transformed, originals = [], []
    for part in manifests["requests"].parts:
        table = store.read_part(part, read_columns)
        found = table.filter(wanted)
        transformed.append(found if request_columns is None else found.select(request_columns))
        originals.append(
            table.filter(pl.col("property") == "").select("request_id", "case_id", *inputs)
        )
    rows = pl.concat(transformed, how="vertical")
    result_columns = None if results is None else list(
        dict.fromkeys(["request_id", *(["probabilities"] if probabilities else []), *results])
    )
    # Not filtered by id: a set of ids hashed again for each of hundreds of result chunks
    # costs more than joining the narrow columns once.
    answers = store.read(manifests["results"], result_columns)
    with_results = rows.join(answers, on="request_id", how="left", maintain_order="left")
    if not probabilities and not inputs:
        return with_results
    original = pl.concat(originals, how="vertical")
    if probabilities:
        original = original.join(
            answers.select("request_id", original_probabilities="probabilities"),
            on="request_id", how="left", maintain_order="left",
        )
    original = original.select(
        "case_id", *(["original_probabilities"] if probabilities else []),
        *[pl.col(name).alias(name.replace("input", "original")) for name in inputs],
    )
    return with_results.join(original, on="case_id", how="left", maintain_order="left")


def _comparison_of(frame: pl.DataFrame) -> Comparison:
    level = frame["level_delta"]
    return Comparison(
        tv=frame["tv"].to_numpy(),
        js=frame["js"].to_numpy(),
        max_abs_delta=frame["max_abs_delta"].to_numpy(),
        confidence_delta=frame["confidence_delta"].to_numpy(),
        selected_before=frame["selected_before"].to_numpy(),
        selected_after=frame["selected_after"].to_numpy(),
        flipped=frame["flipped"].to_numpy(),
        rank_changed=frame["rank_changed"].to_numpy(),
        level_delta=None if level.null_count() == frame.height else level.to_numpy(),
    )


def stage_comparisons(spec: RunSpec, store: Store, manifests: dict[str, Manifest]) -> Manifest:
    loaded = load_contract_cached(spec.contract_path)
    contract = loaded.contract
    upstream = [manifests["requests"].sha256, manifests["results"].sha256]
    key = stage_key("comparisons", "1", loaded.hash, upstream, {})
    cached = store.manifest("comparisons", key)
    if cached is not None:
        return cached
    joined = joined_transformed(
        store, manifests, requests=[], results=["error_kind"], original_inputs=False
    ).filter(pl.col("error_kind").is_null())
    if not joined.height:
        return store.publish("comparisons", key, pl.DataFrame(schema=COMPARISON_COLUMNS))
    width = len(contract.decision.labels)
    configs = dict(contract.properties.enabled())

    def frames() -> Iterator[pl.DataFrame]:
        """One part per property, written as it is compared."""
        for prop in joined["property"].unique(maintain_order=True).to_list():
            rows = joined.filter(pl.col("property") == prop)
            found = compare(
                probability_matrix(rows["original_probabilities"], width),
                probability_matrix(rows["probabilities"], width),
                relation=RELATIONS[prop],
                decision_type=contract.decision.type,
                direction=_direction(configs.get(prop)),
            )
            columns = found.columns()
            if columns["level_delta"] is None:
                columns["level_delta"] = [None] * rows.height
            yield pl.DataFrame(
                {"request_id": rows["request_id"], "case_id": rows["case_id"],
                 "property": rows["property"], **columns},
                schema=COMPARISON_COLUMNS,
            )

    return store.publish("comparisons", key, frames())


def judged(contract: Any, prop: str, config: Any, rows: pl.DataFrame) -> tuple[Comparison, Any]:
    relation = RELATIONS[prop]
    found = _comparison_of(rows)
    verdict = judge(found, Limits.of(config, relation), relation=relation,
                    labels=contract.decision.labels, direction=_direction(config))
    return found, verdict


def minimize_enabled(spec: RunSpec, contract: Any) -> bool:
    return spec.minimize if spec.minimize is not None else contract.fuzz.minimize


MINIMIZED_SCHEMA = {"request_id": pl.String, "reduced_json": pl.String, "backend_calls": pl.Int64}


def stage_minimized(spec: RunSpec, store: Store, manifests: dict[str, Manifest]) -> Manifest:
    """Shrink failing transformed cases (keyed by run id: it calls the backend)."""
    loaded = load_contract_cached(spec.contract_path)
    contract = loaded.contract
    upstream = [manifests["comparisons"].sha256]
    key = stage_key("minimized", "1", loaded.hash, upstream,
                    {"run_id": spec.run_id, "minimize": minimize_enabled(spec, contract)})
    cached = store.manifest("minimized", key)
    if cached is not None:
        return cached
    empty = pl.DataFrame(schema=MINIMIZED_SCHEMA)
    if not minimize_enabled(spec, contract):
        return store.publish("minimized", key, empty)
    comparisons = store.read(manifests["comparisons"])
    jobs, ids = [], []
    configs = dict(contract.properties.enabled())
    labels = contract.decision.labels
    for prop in comparisons["property"].unique(maintain_order=True).to_list():
        config = configs.get(prop)
        if config is None:
            continue
        rows = comparisons.filter(pl.col("property") == prop)
        _, verdict = judged(contract, prop, config, rows)
        failing = np.flatnonzero(verdict.limit_violated | verdict.flip_violated)
        if not len(failing):
            continue
        failing_ids = rows["request_id"].gather(failing)
        joined = joined_transformed(
            store, manifests, requests=["steps_json"], results=[],
            where=pl.col("request_id").is_in(failing_ids.implode()),
        ).drop("case_id", "property")
        details = rows[failing.tolist()].join(
            joined, on="request_id", how="left", maintain_order="left"
        )
        judge_fn = make_judge(config, RELATIONS[prop], contract.decision.type, labels,
                              _direction(config))
        width = len(labels)
        originals = probability_matrix(details["original_probabilities"], width)
        for i, row in enumerate(details.iter_rows(named=True)):
            original_input = case_input(row["original_text"], row["original_json"])
            steps = json.loads(row["steps_json"])
            jobs.append(ShrinkJob(prop, steps, original_input, originals[i], judge_fn))
            ids.append(row["request_id"])
    if not jobs:
        return store.publish("minimized", key, empty)
    backend = run_backend(contract, spec.backend, store, spec.run_id)
    decider = CandidateDecider(contract, spec.backend, spec.max_concurrency, backend)
    try:
        shrunk = minimize_many(jobs, decider, labels=labels, text_field=contract.fuzz.text_field,
                               max_calls=contract.fuzz.max_minimize_calls)
    finally:
        decider.close()
    table = pl.DataFrame(
        {
            "request_id": ids,
            "reduced_json": [json.dumps(_jsonable(s.reduced)) if s.reduced else None
                             for s in shrunk],
            "backend_calls": [s.backend_calls for s in shrunk],
        },
        schema=MINIMIZED_SCHEMA,
    )
    return store.publish("minimized", key, table)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
