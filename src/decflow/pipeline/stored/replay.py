"""Replay: re-send stored property failures and their reduced examples.

For each selected failure the original case is decided again, the stored transformed case
is re-sent exactly as stored (input and presentation, `case_id` = the transformed id) and so
is its reduced version; they are judged with the contract's current settings for that
property (or the stored ones when it is no longer enabled). An example reproduces when it
still violates, or, when the stored case was an error, when the same error kind comes back.
Replay also says whether the seed still regenerates the stored sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from decflow.contracts.properties import property_model
from decflow.errors import DecflowError
from decflow.metrics.columns import probability_matrix
from decflow.pipeline.contract_run.transformed import relation_direction
from decflow.pipeline.direct_calls import CandidateDecider
from decflow.pipeline.stored.contracts import stored_contract
from decflow.properties.generate import regeneration_status, relation_of, transformed_properties
from decflow.properties.minimize import make_judge
from decflow.report.modes import MODES
from decflow.report.sections import property_failures
from decflow.report.versions import REPORT_VERSION
from decflow.store.runs import now_iso
from decflow.store.store import Store
from decflow.version import __version__

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.properties import PropertyConfig

def _select(failures: list[dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return failures
    by_id = {f["id"]: f for f in failures}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        example = failures[0]["id"] if failures else "option_order/<case id>/0"
        raise DecflowError(
            f"--id {unknown[0]}: no such stored failure (ids look like '{example}')"
        )
    return [by_id[i] for i in ids]


def _presentation(item: dict[str, Any]) -> list[tuple[str, str]] | None:
    pairs = item.get("presentation")
    return [(shown, label) for shown, label in pairs] if pairs else None


def _config(contract: Contract, report: dict[str, Any], prop: str) -> PropertyConfig:
    """The property's settings in the contract at hand, else those the run stored (taken
    as they are: they are what the run was judged with)."""
    current = dict(contract.properties.enabled()).get(prop)
    return current if current is not None else _stored_config(report, prop)


def _stored_config(report: dict[str, Any], prop: str) -> PropertyConfig:
    """The property's settings as the run stored them, taken as they are (not validated
    again: they are what the run generated and judged with)."""
    stored = report["properties"]["config"].get(prop) or {}
    return property_model(prop).model_construct(**stored)


def replay_report(
    report: dict[str, Any],
    loaded: LoadedContract,
    *,
    source: str,
    backend: str | None,
    ids: list[str],
    max_concurrency: int | None = None,
) -> dict[str, Any]:
    mode = MODES.get(str(report.get("mode")))
    if mode is None or not mode.fills("properties") or not report.get("properties"):
        raise DecflowError(f"{source}: replay needs a fuzz or test --all report")
    contract = loaded.contract
    stored = report["contract"]
    if (contract.decision.name, contract.decision.type, list(contract.decision.labels)) != (
        stored["name"], stored["type"], stored["labels"]
    ):
        raise DecflowError(f"{loaded.path}: the contract describes another decision than "
                           f"the report ('{stored['name']}')")
    backend_name = backend or report["backend"]["name"]
    contract.backend_config(backend_name)
    failures = _select(property_failures(report["properties"]), ids)
    base = {
        "report_version": REPORT_VERSION,
        "kind": "replay",
        "decflow_version": __version__,
        "created_at": now_iso(),
        "source": source,
        "contract_path": str(loaded.path),
        "contract_hash": loaded.hash,
        "contract_changed": loaded.hash != stored["hash"],
        "backend": backend_name,
    }
    if not failures:
        return {**base, "status": "pass", "exit_code": 0,
                "headline": "PASS: no stored property failure to replay", "outcomes": [],
                "message": "Nothing to replay: the report has no property failures."}
    originals = {r["case_id"]: r["input"] for r in report["results"]}
    decider = CandidateDecider(contract, backend_name, max_concurrency)
    try:
        outcomes = [_replay_one(item, originals, contract, report, decider) for item in failures]
    finally:
        decider.close()
    reproduced = sum(1 for o in outcomes if o["reproduced"])
    status = "fail" if reproduced else "pass"
    line = f"{status.upper()}: {reproduced}/{len(outcomes)} stored failures reproduce"
    return {**base, "status": status, "exit_code": 1 if reproduced else 0,
            "headline": line, "outcomes": outcomes}


def _replay_one(
    item: dict[str, Any],
    originals: dict[str, Any],
    contract: Contract,
    report: dict[str, Any],
    decider: CandidateDecider,
) -> dict[str, Any]:
    prop, case_id = item["property"], item["case_id"]
    labels = contract.decision.labels
    config = _config(contract, report, prop)
    judge = make_judge(config, relation_of(prop), contract.decision.type, labels,
                       relation_direction(config))
    original_input = originals[case_id]
    examples = [("transformed", item)]
    if item.get("reduced"):
        examples.append(("reduced", item["reduced"]))
    candidates = [(original_input, None)] + [(e["input"], _presentation(e)) for _, e in examples]
    ids = [case_id] + [item["id"]] * len(examples)
    results = decider.decide(candidates, ids)
    width = len(labels)
    matrix = probability_matrix(results["probabilities"], width)
    kinds = results["error_kind"].to_list()
    messages = results["error_message"].to_list()
    original_error = f"{kinds[0]}: {messages[0]}" if kinds[0] else None
    outcome_examples = []
    for position, (kind_name, example) in enumerate(examples, start=1):
        stored_error = (item.get("error") or {}).get("kind") if kind_name == "transformed" else None
        error_kind = kinds[position]
        comparison, violations = None, list[str]()
        if original_error is None and error_kind is None:
            comparison, violations = judge(matrix[0], matrix[position])
        reproduced = error_kind == stored_error if stored_error else bool(violations)
        outcome_examples.append({
            "kind": kind_name,
            "input": example["input"],
            "presentation": example.get("presentation"),
            "stored_violations": example.get("violations", []),
            "stored_error": stored_error,
            "probabilities": None if error_kind else dict(
                zip(labels, np.asarray(matrix[position]).tolist(), strict=True)
            ),
            "error": f"{error_kind}: {messages[position]}" if error_kind else None,
            "comparison": comparison,
            "violations": violations,
            "reproduced": reproduced,
        })
    regenerated = regeneration_status(
        prop, _stored_config(report, prop),
        seed=report["properties"]["seed"], case_id=case_id, input=original_input,
        labels=labels, decision_type=contract.decision.type,
        text_field=report["properties"]["fuzz"].get("text_field"),
        sample=item["sample"], steps=item["steps"], transformed_input=item["input"],
        presentation=_presentation(item),
    ) if prop in transformed_properties() else "n/a"
    return {
        "id": item["id"],
        "property": prop,
        "case_id": case_id,
        "regenerated": regenerated,
        "original_error": original_error,
        "examples": outcome_examples,
        "reproduced": any(e["reproduced"] for e in outcome_examples),
    }


def replay_target(
    target: str,
    store: Store,
    *,
    ids: list[str] | None = None,
    contract: str | None = None,
    backend: str | None = None,
    max_concurrency: int | None = None,
) -> dict[str, Any]:
    """Replay a stored report (a file, or a run id in `store`) with `contract`, else the
    contract copy kept with the run, else the contract path the report names."""
    from decflow.contracts import load_contract
    from decflow.report.loading import load_verified

    verified, source, _run_id = load_verified(target, store)
    report = verified.to_dict()
    path = contract or stored_contract(report, store) or report["contract"]["path"]
    try:
        loaded = load_contract(path)
    except DecflowError as exc:
        raise DecflowError(f"cannot read contract {path} ({exc}); pass --contract") from None
    return replay_report(report, loaded, source=source, backend=backend, ids=list(ids or []),
                         max_concurrency=max_concurrency)
