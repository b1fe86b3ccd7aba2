"""Derived requests: transformed cases of every enabled property (fuzz / all modes).

Each property derives its transformations per (seed, property, case id) independently, so
the same contract, dataset and seed always give the same requests. Cases a property cannot
transform are recorded as skipped with the reference's reason; provider failures become
requests that carry their error and are never sent.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from decflow.data.golden import case_input, compact_json
from decflow.errors import DecflowError
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.pipeline.spec import RunSpec

FUZZ_MODES = ("fuzz", "all")


def selected_properties(spec: RunSpec, contract: Any) -> list[tuple[str, Any]]:
    """Enabled properties in the fixed order, narrowed by `-p` (which must name enabled ones)."""
    enabled = [
        (name, config) for name, config in contract.properties.enabled()
        if name != "counterfactual"
    ]
    if spec.properties is not None:
        names = {name for name, _ in enabled}
        unknown = [p for p in spec.properties if p not in names]
        if unknown:
            listed = ", ".join(sorted(names)) or "none"
            raise DecflowError(
                f"property '{unknown[0]}' is not enabled in the contract (enabled: {listed})"
            )
        enabled = [(n, c) for n, c in enabled if n in spec.properties]
    if not enabled:
        raise DecflowError("no property is enabled; add one under 'properties' in the contract")
    return enabled


def run_seed(spec: RunSpec, contract: Any) -> int:
    return spec.seed if spec.seed is not None else contract.fuzz.seed


def derived_requests(
    spec: RunSpec, loaded: Any, cases: pl.DataFrame
) -> tuple[list[pl.DataFrame], dict[str, Any]]:
    """Transformed requests for the properties of this run, plus skipped cases."""
    extra: dict[str, Any] = {"skipped": [], "provenance": {}}
    if spec.mode not in FUZZ_MODES:
        return [], extra
    from decflow.properties.generate import generate
    from decflow.properties.paraphrasers import build_paraphraser

    contract = loaded.contract
    labels = tuple(contract.decision.labels)
    seed = run_seed(spec, contract)
    text_field = contract.fuzz.text_field
    columns: dict[str, list[Any]] = {
        name: [] for name in (
            "request_id", "case_id", "property", "sample", "input_text", "input_json",
            "shown_labels", "label_order", "steps_json", "pre_error_kind", "pre_error_message",
        )
    }
    index_of = {label: i for i, label in enumerate(labels)}
    inputs = [
        (case_id, case_input(text, obj))
        for case_id, text, obj in zip(
            cases["case_id"], cases["input_text"], cases["input_json"], strict=True
        )
    ]
    for name, config in selected_properties(spec, contract):
        paraphraser = (
            build_paraphraser(config.source, base_dir=loaded.base_dir, seed=seed)
            if name == "paraphrase" else None
        )
        for case_id, value in inputs:
            generated = generate(
                name, config, seed=seed, case_id=case_id, input=value, labels=labels,
                decision_type=contract.decision.type, text_field=text_field,
                paraphraser=paraphraser,
            )
            if generated.provenance:
                extra["provenance"].setdefault(name, {})[case_id] = generated.provenance
            if generated.failure is not None:
                _add(columns, name, case_id, 0, value, None, labels, index_of, [],
                     generated.failure.kind, generated.failure.message)
                continue
            if generated.skip_reason is not None:
                extra["skipped"].append(
                    {"property": name, "case_id": case_id, "reason": generated.skip_reason}
                )
                continue
            for item in generated.transformed:
                _add(columns, name, case_id, item.sample, item.input, item.presentation,
                     labels, index_of, item.steps, None, None)
    frame = pl.DataFrame(columns, schema=REQUESTS_SCHEMA)
    return [frame], extra


def _add(
    columns: dict[str, list[Any]],
    prop: str,
    case_id: str,
    sample: int,
    value: Any,
    presentation: list[tuple[str, str]] | None,
    labels: tuple[str, ...],
    index_of: dict[str, int],
    steps: list[dict[str, Any]],
    error_kind: str | None,
    error_message: str | None,
) -> None:
    if presentation is None:
        shown, order = list(labels), list(range(len(labels)))
    else:
        shown = [s for s, _ in presentation]
        order = [index_of[label] for _, label in presentation]
    columns["request_id"].append(f"{prop}/{case_id}/{sample}")
    columns["case_id"].append(case_id)
    columns["property"].append(prop)
    columns["sample"].append(sample)
    columns["input_text"].append(value if isinstance(value, str) else None)
    columns["input_json"].append(None if isinstance(value, str) else compact_json(value))
    columns["shown_labels"].append(shown)
    columns["label_order"].append(order)
    columns["steps_json"].append(json.dumps(steps, ensure_ascii=False))
    columns["pre_error_kind"].append(error_kind)
    columns["pre_error_message"].append(error_message)

