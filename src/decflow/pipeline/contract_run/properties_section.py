"""The report's `properties` section, judged with the contract at hand.

Per enabled property: summary, checks, skipped cases and the failing transformed cases with
their reduced examples. A property enabled in the contract but absent from the stored run
fails with "the property was not run"; reduced examples that no longer fail are dropped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.data.golden_dataset import case_input
from decflow.metrics.columns import probability_matrix
from decflow.pipeline.contract_run.calls import ORIGINAL_ERROR
from decflow.pipeline.contract_run.derive import (
    DIAGNOSTIC_PROPERTIES,
    run_seed,
    selected_properties,
)
from decflow.pipeline.contract_run.transformed import (
    COMPARISON_COLUMNS,
    joined_transformed,
    judged,
)
from decflow.pipeline.spec import RunSpec
from decflow.properties.generate import relation_of
from decflow.properties.summary import property_checks, property_summary, rate_evidence
from decflow.store.store import Manifest, Part, Store

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.properties import PropertyConfig

def _presentation(row: dict[str, Any], labels: tuple[str, ...]) -> list[list[str]] | None:
    shown, order = row["shown_labels"], row["label_order"]
    if list(shown) == list(labels) and list(order) == list(range(len(labels))):
        return None
    return [[s, labels[i]] for s, i in zip(shown, order, strict=True)]


def _config_dump(config: PropertyConfig | None) -> dict[str, Any] | None:
    return None if config is None else config.model_dump(mode="json")


def properties_section(
    loaded: LoadedContract, spec: RunSpec, store: Store, manifests: dict[str, Manifest],
    table: pl.DataFrame,
) -> dict[str, Any]:
    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    requests_extra = manifests["requests"].extra
    # Per property the summaries need the number of transformed requests and the errored
    # ones; the listed failures and the paraphrase inputs are read for their own rows.
    counts = _transformed_counts(store, manifests["requests"])
    errored = _errored(store, manifests)
    comparisons_of = _by_property(store, manifests["comparisons"])
    minimized = store.read(manifests["minimized"]) if "minimized" in manifests else None
    reduced_of = (
        dict(zip(minimized["request_id"], minimized["reduced_json"], strict=True))
        if minimized is not None else {}
    )
    skipped = requests_extra.get("skipped", [])
    stored_properties = set(counts) | {s["property"] for s in skipped}
    summaries: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []  # case-level bounds beside DecGuard's checks
    for prop, config in selected_properties(spec, contract):
        relation = relation_of(prop)
        if prop not in stored_properties:
            checks.extend(c.to_dict() for c in property_checks(None, prop, config, relation))
            continue
        errors = errored.filter(pl.col("property") == prop)
        evaluated = comparisons_of(prop)
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
            error_kinds=errors["error_kind"].to_list() + [None] * (
                counts.get(prop, 0) - errors.height
            ),
            comparison=found,
            judgement=verdict,
            n_reduced=len(still_failing),
            direction=getattr(config, "direction", "increasing") or "increasing",
        )
        if prop == "paraphrase":
            summary["rerun_evidence"] = _is_identity(_with_original_inputs(
                store, manifests["requests"], prop
            ))
        summaries.append(summary)
        checks.extend(c.to_dict() for c in property_checks(summary, prop, config, relation))
        evidence.extend(rate_evidence(
            prop, config, relation, evaluated["case_id"].to_numpy(), verdict.limit_violated,
            found.flipped, rounding_seed=spec.rounding_seed,
        ))
        listed = pl.concat([
            pl.Series("request_id", rids, dtype=pl.String),
            errors.filter(pl.col("error_kind") != ORIGINAL_ERROR)["request_id"],
        ])
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
        "rate_evidence": evidence,
    }


def _by_property(store: Store, comparisons: Manifest) -> Callable[[str], pl.DataFrame]:
    """A reader of one property's comparisons that reads only the parts holding it (the
    comparisons stage writes a part per property)."""
    holding: dict[str, list[Part]] = {}
    for part in comparisons.parts:
        for prop in store.read_part(part, ["property"])["property"].unique().to_list():
            holding.setdefault(prop, []).append(part)

    def read(prop: str) -> pl.DataFrame:
        parts = tuple(holding.get(prop, ()))
        if not parts:
            return pl.DataFrame(schema=COMPARISON_COLUMNS)
        return store.read(dataclasses.replace(comparisons, parts=parts),
                          where=pl.col("property") == prop)

    return read


def _transformed_counts(store: Store, requests: Manifest) -> dict[str, int]:
    """Transformed requests per metamorphic property, counted part by part."""
    counts: dict[str, int] = {}
    for part in requests.parts:
        for prop, n in store.read_part(part, ["property"])["property"].value_counts().iter_rows():
            counts[prop] = counts.get(prop, 0) + n
    return {p: n for p, n in counts.items() if p and p not in DIAGNOSTIC_PROPERTIES}


def _errored(store: Store, manifests: dict[str, Manifest]) -> pl.DataFrame:
    """request_id, property, error_kind of the transformed requests whose result is an error
    (joined with the requests only when some result is one)."""
    failed = store.read(
        manifests["results"], ["error_kind"], where=pl.col("error_kind").is_not_null()
    )
    if not failed.height:
        return pl.DataFrame(
            schema={"request_id": pl.String, "property": pl.String, "error_kind": pl.String}
        )
    return joined_transformed(
        store, manifests, requests=[], results=["error_kind"], original_inputs=False,
        probabilities=False,
    ).filter(pl.col("error_kind").is_not_null()).select("request_id", "property", "error_kind")


def _with_original_inputs(store: Store, requests: Manifest, prop: str) -> pl.DataFrame:
    """A property's requests with their original's input_text / input_json."""
    rows = store.read(
        requests, ["case_id", "property", "input_text", "input_json"],
        where=pl.col("property").is_in(["", prop]),
    )
    originals = rows.filter(pl.col("property") == "").select(
        "case_id", original_text="input_text", original_json="input_json"
    )
    return rows.filter(pl.col("property") == prop).join(
        originals, on="case_id", how="left", maintain_order="left"
    )


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
