"""Canonical JSON and hash: DecGuard 0.1.1's own vectors are the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from decflow.contracts import canonical_json, contract_hash, load_contract, parse_contract
from tests.support.paths import REFERENCE

EXAMPLES = REFERENCE / "decguard-examples"
VECTORS = [
    json.loads(line)
    for line in (REFERENCE / "decguard-vectors" / "contract-hashes.jsonl").read_text().splitlines()
    if line.strip()
]
HASHES = {vector["contract"]: vector["hash"] for vector in VECTORS}


def _example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def _hash_of(data: dict) -> str:
    return contract_hash(parse_contract(data, "test.yaml"))


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["contract"])
def test_example_contracts_match_decguard_vectors(vector: dict) -> None:
    loaded = load_contract(EXAMPLES / vector["contract"])
    assert canonical_json(loaded.contract) == vector["canonical_json"]
    assert loaded.hash == vector["hash"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["contract"])
def test_json_and_reordered_keys_hash_the_same(vector: dict, tmp_path: Path) -> None:
    data = _example(vector["contract"])
    reordered = {key: data[key] for key in reversed(list(data))}
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(reordered, indent=3), encoding="utf-8")
    assert load_contract(path).hash == vector["hash"]


def test_comments_formatting_and_number_spelling_do_not_change_the_hash(tmp_path: Path) -> None:
    text = (EXAMPLES / "spam" / "decguard.yaml").read_text()
    edited = "# a new leading comment\n" + text.replace(
        "min_accuracy: 0.9\n", "min_accuracy: 0.90   # restated\n"
    ).replace("labels: [spam, ham]", "labels:\n    - spam\n    - 'ham'")
    assert edited != text
    path = tmp_path / "spam.yml"
    path.write_text(edited, encoding="utf-8")
    assert load_contract(path).hash == HASHES["spam/decguard.yaml"]


CORE_DEFAULTS = [
    ("evaluation", {"calibration_bins": 10, "probability_tolerance": 0.001, "max_concurrency": 4}),
    ("fuzz", {"minimize": True, "max_minimize_calls": 32, "text_field": None}),
    ("regression", {"min_segment_size": 5, "segment_by": [], "warnings": {}}),
    ("production", {"segments": [], "segment_warnings": {"min_accuracy": None}}),
    ("warnings", {"max_ece": None}),
]


@pytest.mark.parametrize(("section", "restated"), CORE_DEFAULTS, ids=[s for s, _ in CORE_DEFAULTS])
def test_restating_a_core_default_keeps_the_hash(section: str, restated: dict) -> None:
    data = _example("spam/decguard.yaml")
    data[section] = {**data.get(section, {}), **restated}
    assert _hash_of(data) == HASHES["spam/decguard.yaml"]


def test_restating_property_defaults_keeps_the_hash() -> None:
    data = _example("spam/decguard.yaml")
    data["properties"]["irrelevant_context"].update(
        {"enabled": True, "level": "requirement", "insertions": 1, "samples": 2}
    )
    data["properties"]["whitespace"] = None
    assert _hash_of(data) == HASHES["spam/decguard.yaml"]


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["backends"]["staging"].update(timeout_s=10.0),
        lambda d: d["backends"]["staging"].update(max_retries=0),
        lambda d: d["backend"].update(seed=0),
        lambda d: d.update(evaluation={**d["evaluation"], "max_concurrency": 8}),
        lambda d: d["requirements"].update(min_accuracy=0.91),
        lambda d: d["properties"]["option_order"].update(enabled=False),
    ],
    ids=["timeout_float", "restated_provider_default", "mock_seed", "concurrency", "gate", "off"],
)
def test_semantic_and_provider_changes_change_the_hash(change) -> None:  # type: ignore[no-untyped-def]
    data = _example("refund/decguard.yaml")
    assert _hash_of(data) == HASHES["refund/decguard.yaml"]
    change(data)
    assert _hash_of(data) != HASHES["refund/decguard.yaml"]


def test_integer_in_a_float_gate_is_hashed_as_float() -> None:
    data = _example("refund/decguard.yaml")
    loaded = parse_contract(data, "refund.yaml")
    assert '"max_latency_p95_ms":500.0' in canonical_json(loaded)
    assert '"timeout_s":10,' in canonical_json(loaded)


@pytest.mark.parametrize(
    ("extension", "value"),
    [
        ("diagnostics", {"stability": {}}),
        ("properties.case_swap", {"max_flip_rate": 0}),
        ("properties.normalization", {"max_tv_distance": 0.02}),
        ("properties.counterfactual", {}),
        ("production.gating", "evidence"),
        ("monitor", {"harmful_shift": {"tolerance": 0.02}}),
    ],
)
def test_extensions_are_hashed_only_when_set(extension: str, value: dict) -> None:
    data = _example("spam/decguard.yaml")
    section, _, key = extension.partition(".")
    target = data.setdefault(section, {})
    if key:
        target[key] = value
    else:
        data[section] = value
    contract = parse_contract(data, "spam.yaml")
    doc = json.loads(canonical_json(contract))
    assert (doc[section][key] if key else doc[section]) is not None
    assert contract_hash(contract) != HASHES["spam/decguard.yaml"]


def test_empty_diagnostics_section_is_the_same_as_none() -> None:
    data = _example("spam/decguard.yaml")
    data["diagnostics"] = {}
    contract = parse_contract(data, "spam.yaml")
    assert contract.diagnostics is None
    assert contract_hash(contract) == HASHES["spam/decguard.yaml"]


def test_production_gating_and_monitor_left_unset_keep_the_hash() -> None:
    data = _example("refund/decguard.yaml")
    data.setdefault("production", {})["gating"] = None
    data["monitor"] = None
    contract = parse_contract(data, "refund.yaml")
    assert contract.production.gating is None and contract.monitor is None
    assert "gating" not in json.loads(canonical_json(contract))["production"]
    assert contract_hash(contract) == HASHES["refund/decguard.yaml"]


def test_monitor_section_restates_its_defaults_in_the_hash() -> None:
    data = _example("spam/decguard.yaml")
    data["monitor"] = {}
    bare = parse_contract(data, "spam.yaml")
    data["monitor"] = {"window": "1d", "without_timestamp": "error", "harmful_shift": None}
    assert contract_hash(parse_contract(data, "spam.yaml")) == contract_hash(bare)
    assert json.loads(canonical_json(bare))["monitor"] == {
        "window": "1d", "without_timestamp": "error", "harmful_shift": None}
