"""Helpers for the property tests: the reference examples, vectors and default configs.

Configs are built from the example contracts with the defaults of the reference's table, as
plain namespaces: the property code only reads attributes.
"""

from __future__ import annotations

import json
from functools import cache
from types import SimpleNamespace
from typing import Any

import yaml

from tests.support.paths import REFERENCE

EXAMPLES = REFERENCE / "decguard-examples"
VECTORS = REFERENCE / "decguard-vectors"

SHARED_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "level": "requirement",
    "max_violation_rate": 0.0,
    "max_flip_rate": None,
    "max_tv_distance": None,
    "max_js_divergence": None,
    "max_abs_delta": None,
    "max_confidence_delta": None,
}
PROPERTY_DEFAULTS: dict[str, dict[str, Any]] = {
    "option_order": {"samples": 3},
    "label_format": {
        "styles": ["upper", "lower", "capitalized", "lettered", "numbered", "quoted", "bracketed"],
        "aliases": {},
        "samples": 2,
    },
    "irrelevant_context": {"fragments": None, "insertions": 1, "samples": 2},
    "repeated_context": {"fragments": None, "repeats": 3, "samples": 1},
    "whitespace": {"edits": 3, "samples": 2},
    "paraphrase": {"source": {"provider": "identity"}, "samples": 1},
    "inversion": {"rewrites": [], "samples": 1},
    "monotonic": {
        "field": None,
        "direction": "increasing",
        "deltas": [1.0],
        "max_level_decrease": 0.0,
    },
    "case_swap": {},
    "normalization": {},
}

RUN_CONTRACTS = {
    "refund-default-seed42": ("refund", "default"),
    "refund-order_sensitive-seed42": ("refund", "order_sensitive"),
    "severity-seed0": ("severity", "default"),
    "spam-seed0": ("spam", "default"),
}


def property_config(name: str, **values: Any) -> SimpleNamespace:
    return SimpleNamespace(**{**SHARED_DEFAULTS, **PROPERTY_DEFAULTS[name], **values})


@cache
def contract(example: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / example / "decguard.yaml").read_text())


def labels(example: str) -> list[str]:
    decision = contract(example)["decision"]
    if decision["type"] == "score":
        return [str(level) for level in decision["levels"]]
    return list(decision.get("options") or decision.get("labels") or ["yes", "no"])


def decision_type(example: str) -> str:
    return str(contract(example)["decision"]["type"])


def configs(example: str) -> dict[str, SimpleNamespace]:
    return {
        name: property_config(name, **values)
        for name, values in contract(example)["properties"].items()
    }


def fuzz(example: str) -> dict[str, Any]:
    return {
        "seed": 0,
        "text_field": None,
        "max_minimize_calls": 32,
        **contract(example).get("fuzz", {}),
    }


@cache
def cases(example: str) -> list[tuple[str, Any]]:
    """(case id, input) in dataset order; missing ids are `case-<n>` over non-blank rows."""
    path = EXAMPLES / example / contract(example)["dataset"]
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        rows = json.loads(path.read_text())
    return [(row.get("id") or f"case-{n}", row["input"]) for n, row in enumerate(rows, start=1)]


@cache
def transformations() -> list[dict[str, Any]]:
    lines = (VECTORS / "transformations.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@cache
def summaries(run: str) -> dict[str, Any]:
    return json.loads((VECTORS / f"summaries-{run}.json").read_text())


@cache
def golden_probabilities(example: str, backend: str) -> dict[str, list[float]]:
    """Original per-case probabilities (contract order) from the reference golden runs."""
    name = {"refund": f"golden-refund-test-{backend}.json"}.get(
        example, f"golden-{example}-all.json"
    )
    data = json.loads((VECTORS / name).read_text())
    order = labels(example)
    return {r["case_id"]: [r["probabilities"][lab] for lab in order] for r in data["results"]}
