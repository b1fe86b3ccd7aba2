"""The report's `properties` section, judged with the contract at hand.

Per enabled property: summary, checks, skipped cases and the failing transformed cases with
their reduced examples. A property enabled in the contract but absent from the stored run
fails with "the property was not run"; reduced examples that no longer fail are dropped.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl

from decflow.data.golden import case_input
from decflow.pipeline.derive import run_seed, selected_properties
from decflow.pipeline.golden import probability_matrix
from decflow.pipeline.properties import joined_transformed, judged
from decflow.pipeline.spec import RunSpec
from decflow.properties.generate import RELATIONS
from decflow.properties.summary import property_checks, property_summary
from decflow.store.store import Manifest, Store

ORIGINAL_ERROR = "original_error"


def _presentation(row: dict[str, Any], labels: tuple[str, ...]) -> list[list[str]] | None:
    shown, order = row["shown_labels"], row["label_order"]
    if list(shown) == list(labels) and list(order) == list(range(len(labels))):
        return None
    return [[s, labels[i]] for s, i in zip(shown, order, strict=True)]


def _config_dump(config: Any) -> dict[str, Any] | None:
    return None if config is None else config.model_dump(mode="json")


def properties_section(
    loaded: Any, spec: RunSpec, store: Store, manifests: dict[str, Manifest], table: pl.DataFrame
) -> dict[str, Any]:
    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    requests_extra = manifests["requests"].extra
    # Only what the summaries need of every transformed request; the listed failures and
    # the paraphrase inputs are read for their own rows.
    joined = joined_transformed(
        store, manifests, requests=[], results=["error_kind"], original_inputs=False,
        probabilities=False,
    )
    minimized = store.read(manifests["minimized"]) if "minimized" in manifests else None
    reduced_of = (
        dict(zip(minimized["request_id"], minimized["reduced_json"], strict=True))
        if minimized is not None else {}
    )
    skipped = requests_extra.get("skipped", [])
    stored_properties = set(joined["property"].unique().to_list())
    stored_properties |= {s["property"] for s in skipped}
    summaries, checks, failures = [], [], []
    for prop, config in selected_properties(spec, contract):
        relation = RELATIONS[prop]
        if prop not in stored_properties:
            checks.extend(c.to_dict() for c in property_checks(None, prop, config, relation))
            continue
        rows = joined.filter(pl.col("property") == prop)
        # The comparisons stage writes a part per property: read one property at a time.
        evaluated = store.read(manifests["comparisons"], where=pl.col("property") == prop)
        found, verdict = judged(contract, prop, config, evaluated)
        failing = np.flatnonzero(verdict.limit_violated | verdict.flip_violated)
        rids = evaluated["request_id"].gather(failing).to_list() if evaluated.height else []
        failing_ids = set(rids)
        pairs = list(zip(rids, failing.tolist(), strict=True))
        violations_of = {rid: verdict.violations[i] for rid, i in pairs}
        comparison_of = {rid: found.row(i, labels) for rid, i in pairs}
        still_failing = {
            rid for rid in failing_ids if reduced_of.get(rid) is not None
        }
        summary = property_summary(
            prop,
            level=config.level,
            relation=relation,
            n_cases=table.height,
            n_skipped=sum(1 for s in skipped if s["property"] == prop),
            error_kinds=rows["error_kind"].to_list(),
            comparison=found,
            judgement=verdict,
            n_reduced=len(still_failing),
            direction=getattr(config, "direction", "increasing") or "increasing",
        )
        if prop == "paraphrase":
            summary["rerun_evidence"] = _is_identity(joined_transformed(
                store, manifests, requests=["input_text", "input_json"], results=[],
                probabilities=False, where=pl.col("property") == prop,
            ))
        summaries.append(summary)
        checks.extend(c.to_dict() for c in property_checks(summary, prop, config, relation))
        listed = rows.filter(
            pl.col("request_id").is_in(list(failing_ids))
            | (pl.col("error_kind").is_not_null() & (pl.col("error_kind") != ORIGINAL_ERROR))
        )["request_id"]
        if listed.len():
            details = joined_transformed(
                store, manifests, where=pl.col("request_id").is_in(listed.implode())
            )
            failures.extend(
                _failures(details, labels, violations_of, comparison_of, reduced_of)
            )
    seed = run_seed(spec, contract)
    return {
        "seed": seed,
        "fuzz": contract.fuzz.model_dump(mode="json") | {"seed": seed},
        "config": {
            name: _config_dump(getattr(contract.properties, name))
            for name, _ in selected_properties(spec, contract)
        },
        "summaries": summaries,
        "skipped": skipped,
        "failures": failures[:200],
        "n_failures": len(failures),
        "checks": checks,
    }


def _is_identity(rows: pl.DataFrame) -> bool:
    """`paraphrase` with the identity provider re-asks the same input: rerun evidence."""
    same = (rows["input_text"] == rows["original_text"]).fill_null(False) | (
        rows["input_json"] == rows["original_json"]
    ).fill_null(False)
    return bool(rows.height) and bool(same.all())


def _failures(
    listed: pl.DataFrame,
    labels: tuple[str, ...],
    violations_of: dict[str, list[str]],
    comparison_of: dict[str, dict[str, Any]],
    reduced_of: dict[str, str | None],
) -> list[dict[str, Any]]:
    """The listed transformed cases (failing or errored), every column of each."""
    items = []
    width = len(labels)
    for row in listed.iter_rows(named=True):
        rid = row["request_id"]
        errored = row["error_kind"] is not None
        probabilities = None
        if not errored:
            values = probability_matrix(pl.Series([row["probabilities"]]), width)[0]
            probabilities = dict(zip(labels, np.asarray(values).tolist(), strict=True))
        reduced = reduced_of.get(rid)
        items.append({
            "id": rid,
            "property": row["property"],
            "case_id": row["case_id"],
            "sample": row["sample"],
            "steps": json.loads(row["steps_json"]) if row["steps_json"] else [],
            "input": case_input(row["input_text"], row["input_json"]),
            "presentation": _presentation(row, labels),
            "probabilities": probabilities,
            "error": {"kind": row["error_kind"], "message": row["error_message"]}
            if errored else None,
            "comparison": comparison_of.get(rid),
            "violations": violations_of.get(rid, []),
            "reduced": json.loads(reduced) if reduced else None,
        })
    return items
