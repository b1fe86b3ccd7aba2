"""Validate a parsed contract document section by section and collect every problem."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from decflow.contracts import cross_section as checks
from decflow.contracts.base import check_file_path, check_name
from decflow.contracts.contract import DEFAULT_BACKEND, Contract
from decflow.contracts.decision import DECISION_MODELS, DECISION_TYPES, LABEL_KEYS, Decision
from decflow.contracts.gates import golden_gates_model, production_model, regression_model
from decflow.contracts.problems import (
    UNKNOWN_FIELD,
    describe,
    plain_json_problems,
    problems_from,
)
from decflow.contracts.properties import properties_model
from decflow.contracts.providers import BackendConfig, DecisionContext, parse_backend
from decflow.contracts.sections import (
    Diagnostics,
    Evaluation,
    Fuzz,
    Monitor,
    Policy,
    Sequential,
)
from decflow.errors import ContractError

SCHEMA_VERSION = "0.1"

# Sections that default to an empty model when absent (and so appear in the hash).
CORE_SECTIONS = (
    "evaluation", "requirements", "warnings", "properties", "fuzz", "regression", "production"
)
# Core sections whose every field is an optional limit or setting defaulting to None (the
# golden gates, the properties): absent, each is its model with nothing set, made without
# building the model's validator (`properties` holds every property's settings model: ~40 M
# instructions before a run's first request) and hashed without its serializer
# (`canonical.section_json`).
UNSET_WHEN_ABSENT = ("requirements", "warnings", "properties")
# Sections that stay None when absent.
OPTIONAL_SECTIONS: dict[str, type[BaseModel]] = {
    "policy": Policy, "diagnostics": Diagnostics, "sequential": Sequential, "monitor": Monitor,
}
TOP_LEVEL_KEYS = (
    "schema_version",
    "decision",
    "backend",
    "backends",
    "dataset",
    *CORE_SECTIONS,
    *OPTIONAL_SECTIONS,
)


def _section_models() -> dict[str, type[BaseModel]]:
    """Every section's model; `properties` and the golden gates are built from their
    registries."""
    core: dict[str, type[BaseModel]] = {
        "evaluation": Evaluation,
        "requirements": golden_gates_model(),
        "warnings": golden_gates_model(),
        "properties": properties_model(),
        "fuzz": Fuzz,
        "regression": regression_model(),
        "production": production_model(),
    }
    return {**core, **OPTIONAL_SECTIONS}


def _schema_version(data: dict[str, Any]) -> list[str]:
    if "schema_version" not in data:
        return [f'schema_version: required field is missing (set it to "{SCHEMA_VERSION}")']
    value = data["schema_version"]
    if isinstance(value, float | int) and not isinstance(value, bool):
        return [
            f'schema_version: must be the string "{SCHEMA_VERSION}", got the number {value!r}; '
            f'quote it in YAML: schema_version: "{SCHEMA_VERSION}"'
        ]
    if value != SCHEMA_VERSION:
        return [
            f"schema_version: unsupported version {describe(value)}; this decflow reads "
            f'"{SCHEMA_VERSION}"'
        ]
    return []


def _decision(data: Any) -> tuple[Decision | None, list[str]]:
    if not isinstance(data, dict):
        return None, [f"decision: expected a mapping, got {describe(data)}"]
    kind = data.get("type")
    if "type" not in data:
        return None, ["decision.type: required field is missing (choice, noul or score)"]
    if kind not in DECISION_TYPES:
        return None, [f"decision.type: must be one of choice, noul, score; got {describe(kind)}"]
    misplaced = [
        f"decision.{key}: only {owner} decisions take '{key}'; a {kind} decision lists its "
        f"labels under '{_label_key(kind)}'"
        for key, owner in LABEL_KEYS.items()
        if key in data and owner != kind
    ]
    rest = {k: v for k, v in data.items() if LABEL_KEYS.get(k, kind) == kind}
    try:
        decision = DECISION_MODELS[kind].model_validate(rest)
    except ValidationError as exc:
        return None, misplaced + problems_from(exc, "decision")
    return (None if misplaced else decision), misplaced


def _label_key(kind: str) -> str:
    return next(key for key, owner in LABEL_KEYS.items() if owner == kind)


def _section(name: str, model: type[BaseModel], data: Any) -> tuple[Any, list[str]]:
    try:
        return model.model_validate({} if data is None else data), []
    except ValidationError as exc:
        return None, problems_from(exc, name)


def _backends(
    data: dict[str, Any], ctx: DecisionContext | None
) -> tuple[BackendConfig | None, dict[str, BackendConfig] | None, list[str]]:
    problems: list[str] = []
    if "backend" not in data:
        problems.append("backend: required field is missing (the default backend)")
        default = None
    else:
        default, found = parse_backend(
            data["backend"], name=DEFAULT_BACKEND, path="backend", ctx=ctx
        )
        problems += found
    named = {} if data.get("backends") is None else data["backends"]
    if not isinstance(named, dict):
        return default, None, [*problems, f"backends: expected a mapping, got {describe(named)}"]
    backends: dict[str, BackendConfig] = {}
    for name, raw in named.items():
        path = f"backends.{name}"
        if name == DEFAULT_BACKEND:
            problems.append(f"{path}: 'default' is reserved for the top-level 'backend'")
            continue
        try:
            check_name(name if isinstance(name, str) else "")
        except ValueError:
            problems.append(
                f"{path}: invalid backend name {describe(name)} (start with a letter "
                "or digit; use only letters, digits, '_', '.' and '-')"
            )
            continue
        config, found = parse_backend(raw, name=name, path=path, ctx=ctx)
        problems += found
        if config is not None:
            backends[name] = config
    return default, backends, problems


def _dataset(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str) or not value:
        return [f"dataset: expected a non-empty path string, got {describe(value)}"]
    try:
        check_file_path(value)
    except ValueError as exc:
        return [f"dataset: {exc}"]
    return []


def parse_contract(data: Any, source: str) -> Contract:
    """Validate a parsed contract document; raises ContractError listing every problem."""
    if not isinstance(data, dict):
        raise ContractError(
            source, [f"the contract must be a mapping at the top level, got {describe(data)}"]
        )
    problems = plain_json_problems(data)
    problems += [f"{key}: {UNKNOWN_FIELD}" for key in data if key not in TOP_LEVEL_KEYS]
    problems += _schema_version(data)
    if "decision" not in data:
        problems.append("decision: required field is missing")
        decision = None
    else:
        decision, found = _decision(data["decision"])
        problems += found
    sections: dict[str, Any] = {}
    for name, model in _section_models().items():
        value = data.get(name)
        if value is None and name in OPTIONAL_SECTIONS:
            sections[name] = None
            continue
        if value is None and name in UNSET_WHEN_ABSENT:
            sections[name] = model.model_construct()
            continue
        sections[name], found = _section(name, model, value)
        problems += found
    problems += _dataset(data.get("dataset"))
    diagnostics = sections["diagnostics"]
    if diagnostics is not None and diagnostics.stability is None and diagnostics.blindness is None:
        sections["diagnostics"] = None  # `diagnostics: {}` asks for nothing: same as absent

    evaluation: Evaluation | None = sections["evaluation"]
    ctx = None
    if decision is not None and evaluation is not None:
        ctx = DecisionContext(
            decision.type, decision.labels, decision.description, evaluation.probability_tolerance
        )
    default, backends, found = _backends(data, ctx)
    problems += found
    problems += _cross_section(data, decision, sections)
    if problems:
        # The document-wide JSON check and the section models can report the same line.
        raise ContractError(source, list(dict.fromkeys(problems)))
    assert default is not None and backends is not None and decision is not None
    return Contract(
        schema_version=SCHEMA_VERSION,
        decision=decision,
        backend=default,
        backends=backends,
        dataset=data.get("dataset"),
        **sections,
    )


def _cross_section(
    data: dict[str, Any], decision: Decision | None, sections: dict[str, Any]
) -> list[str]:
    evaluation = sections["evaluation"]
    problems = []
    for name in ("requirements", "warnings"):
        if sections[name] is not None:
            problems += checks.golden_gate_problems(name, sections[name], evaluation, decision)
    if sections["production"] is not None:
        problems += checks.production_problems(sections["production"], evaluation)
    if sections["regression"] is not None:
        problems += checks.regression_problems(sections["regression"])
    if sections["properties"] is not None and decision is not None:
        problems += checks.property_problems(sections["properties"], decision)
    if sections["policy"] is not None:
        named = data.get("backends") or {}  # a non-mapping was reported by _backends
        names = [DEFAULT_BACKEND, *named] if isinstance(named, dict) else None
        problems += checks.policy_problems(sections["policy"], names)
    return problems
