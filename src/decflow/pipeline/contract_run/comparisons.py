"""Property stages: `comparisons` (distances of every transformed case from its original)
and `minimized` (greedy shrinking of failing cases).

Comparisons store raw distances; violations are judged again with the contract at hand when
the report is built, so re-gating a stored run with new limits needs no backend call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.data.golden_dataset import case_input
from decflow.metrics.columns import probability_matrix
from decflow.metrics.compare import compare
from decflow.pipeline.contract_run.backend_plan import run_backend
from decflow.pipeline.contract_run.later_stages import minimize_enabled
from decflow.pipeline.contract_run.transformed import (
    COMPARISON_COLUMNS,
    joined_transformed,
    judged,
    relation_direction,
)
from decflow.pipeline.direct_calls import CandidateDecider
from decflow.pipeline.stage import RunContext
from decflow.properties.generate import relation_of
from decflow.properties.minimize import ShrinkJob, make_judge, minimize_many
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

def compute_comparisons(context: RunContext, key: str) -> Manifest:
    return compare_transformed(context.store, context.manifests, context.loaded.contract, key)


def compare_transformed(
    store: Store, manifests: Mapping[str, Manifest], contract: Contract, key: str
) -> Manifest:
    """Publish the distances of every answered transformed case from its original (also
    what a re-gate of a standalone report computes from its inline transformed cases)."""
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
                relation=relation_of(prop),
                decision_type=contract.decision.type,
                direction=relation_direction(configs.get(prop)),
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


MINIMIZED_SCHEMA = pl.Schema(
    {"request_id": pl.String, "reduced_json": pl.String, "backend_calls": pl.Int64}
)


def compute_minimized(context: RunContext, key: str) -> Manifest:
    """Shrink failing transformed cases (keyed by run id: it calls the backend)."""
    spec, store, manifests = context.spec, context.store, context.manifests
    contract = context.loaded.contract
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
        judge_fn = make_judge(config, relation_of(prop), contract.decision.type, labels,
                              relation_direction(config))
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
