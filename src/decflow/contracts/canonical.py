"""Canonical JSON and hash of a contract (DecGuard-compatible).

Core sections are dumped with their defaults filled in (unset gates and absent core
properties as null), so formatting, key order and restated defaults never change the hash.
Backend entries are hashed exactly as written: their settings belong to the provider.
decflow extensions that are unset are left out entirely, so a plain 0.1 contract hashes
exactly as DecGuard 0.1.1 hashes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from decflow.contracts.contract import Contract
from decflow.contracts.gates import (
    extension_golden_gates,
    extension_production_gates,
    extension_regression_gates,
)
from decflow.contracts.properties import extension_properties


def _dump(model: BaseModel | None) -> Any:
    return None if model is None else model.model_dump(mode="json", by_alias=True)


def section_json(section: BaseModel) -> dict[str, Any]:
    """A golden gates or properties section as JSON: with nothing set, every field is None
    (the section was absent: `parse.UNSET_WHEN_ABSENT`) and so is its JSON, written without
    building the model's serializer; otherwise pydantic's dump."""
    if section.model_fields_set or any(value is not None for value in vars(section).values()):
        dumped: dict[str, Any] = _dump(section)
        return dumped
    return dict.fromkeys(type(section).model_fields)


def _gates(dumped: dict[str, Any], extensions: tuple[str, ...]) -> dict[str, Any]:
    """A gate section without the decflow gates (`extensions`) it leaves unset."""
    return {k: v for k, v in dumped.items() if not (k in extensions and v is None)}


def canonical_dict(contract: Contract) -> dict[str, Any]:
    properties = section_json(contract.properties)
    for name in extension_properties():
        if properties[name] is None:
            del properties[name]
    regression = _dump(contract.regression)
    if regression["gating"] is None:
        del regression["gating"]
    regression = _gates(regression, extension_regression_gates())
    regression["warnings"] = _gates(regression["warnings"], extension_regression_gates())
    evaluation = _dump(contract.evaluation)
    if evaluation["call_cache"] is None:
        del evaluation["call_cache"]
    doc: dict[str, Any] = {
        "schema_version": contract.schema_version,
        "decision": _dump(contract.decision),
        "backend": contract.backend.raw,
        "backends": {name: config.raw for name, config in contract.backends.items()},
        "dataset": contract.dataset,
        "evaluation": evaluation,
        "requirements": _gates(section_json(contract.requirements), extension_golden_gates()),
        "warnings": _gates(section_json(contract.warnings), extension_golden_gates()),
        "properties": properties,
        "fuzz": _dump(contract.fuzz),
        "regression": regression,
        "production": _production(contract),
        "policy": _dump(contract.policy),
    }
    if contract.diagnostics is not None:
        diagnostics = _dump(contract.diagnostics)
        doc["diagnostics"] = {k: v for k, v in diagnostics.items() if v is not None}
    if contract.sequential is not None:
        doc["sequential"] = _dump(contract.sequential)
    if contract.monitor is not None:
        doc["monitor"] = _dump(contract.monitor)
    return doc


def _production(contract: Contract) -> Any:
    production = _dump(contract.production)
    if production is not None:
        for level in ("requirements", "warnings"):
            production[level] = _gates(production[level], extension_production_gates())
        if production["gating"] is None:
            del production["gating"]
    return production


def canonical_json(contract: Contract) -> str:
    return json.dumps(
        canonical_dict(contract),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def contract_hash(contract: Contract) -> str:
    digest = hashlib.sha256(canonical_json(contract).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
