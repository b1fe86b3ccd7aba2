"""The attributes other decflow code reads from a validated contract."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from decflow.contracts import (
    PROPERTIES,
    Counterfactual,
    HttpSettings,
    MockSettings,
    OpenAISettings,
    SystemOneSettings,
    load_contract,
    parse_contract,
)
from decflow.contracts.properties import DEFAULT_FRAGMENTS
from decflow.errors import ContractError, DecflowError
from tests.support.contracts import DELETE, EXAMPLES, edited


def _parse(name: str, edits: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    return parse_contract(edited(name, edits or {}), f"{name}.yaml")


def test_decision_labels_in_canonical_order() -> None:
    assert _parse("refund").decision.labels == ("refund", "reject", "review")
    assert _parse("spam").decision.labels == ("spam", "ham")
    severity = _parse("severity").decision
    assert severity.type == "score"
    assert severity.labels == ("1", "2", "3", "4")


def test_noul_labels_default_to_yes_no() -> None:
    contract = _parse("spam", {"decision.labels": DELETE, "backend": {"provider": "mock"}})
    assert contract.decision.labels == ("yes", "no")


def test_refund_sections() -> None:
    c = load_contract(EXAMPLES / "refund" / "decguard.yaml").contract
    assert c.schema_version == "0.1"
    assert (c.decision.name, c.decision.type) == ("refund_request", "choice")
    assert c.decision.description == "Decide how to handle a customer refund request."
    assert c.dataset == "cases.jsonl"
    ev = c.evaluation
    assert (ev.confidence_threshold, ev.calibration_bins) == (0.8, 10)
    assert (ev.probability_tolerance, ev.max_concurrency) == (0.001, 4)
    assert c.requirements.min_accuracy == 0.9 and c.requirements.max_nll is None
    assert c.warnings.max_latency_p95_ms == 500.0
    assert (c.fuzz.seed, c.fuzz.text_field, c.fuzz.minimize, c.fuzz.max_minimize_calls) == (
        42,
        None,
        True,
        32,
    )
    assert c.regression.max_answer_flip_rate == 0.05
    assert c.regression.warnings.max_answer_flip_rate is None
    assert (c.regression.segment_by, c.regression.min_segment_size) == (["locale"], 5)
    assert c.production.segments == ["locale"]
    assert c.production.requirements.max_fallback_rate == 0.6
    assert c.production.segment_requirements.min_accuracy == 0.8
    assert c.production.warnings.min_accuracy is None
    assert c.production.segment_warnings.max_ece is None
    routes = c.policy.routes
    assert [(r.when and r.when.confidence_gte, r.action, r.backend) for r in routes] == [
        (0.95, "accept", None),
        (0.75, "fallback", "strong_model"),
        (None, "human_review", None),
    ]
    assert c.diagnostics is None


def test_backends_and_backend_config() -> None:
    c = _parse("refund")
    assert c.backend_config("default") is c.backend
    assert c.backend.name == "default"
    assert list(c.backends) == ["order_sensitive", "strong_model", "staging"]
    biased = c.backend_config("order_sensitive")
    assert (biased.provider, biased.model, biased.name) == (
        "mock",
        "refund-mock-v2",
        "order_sensitive",
    )
    assert isinstance(biased.settings, MockSettings)
    assert biased.settings.position_bias == 0.1 and len(biased.settings.rules) == 4
    assert biased.settings.rules[0].probabilities == {
        "refund": 0.96,
        "reject": 0.01,
        "review": 0.03,
    }
    staging = c.backend_config("staging")
    assert isinstance(staging.settings, HttpSettings)
    assert staging.raw == {
        "provider": "http",
        "url": "http://localhost:8080/decide",
        "model": "open-jev-2b",
        "timeout_s": 10,
        "bearer_token_env": "DECGUARD_STAGING_TOKEN",
    }
    s = staging.settings
    assert (s.timeout_s, s.max_retries, s.retry_backoff_s) == (10.0, 0, 0.5)
    assert (s.headers, s.headers_from_env, s.label_map, s.health_url) == ({}, {}, {}, None)
    with pytest.raises(DecflowError) as caught:
        c.backend_config("prod")
    assert str(caught.value) == (
        "unknown backend 'prod'; the contract defines: default, order_sensitive, strong_model, "
        "staging"
    )


def test_mock_defaults() -> None:
    backend = _parse("spam", {"backend": {"provider": "mock"}}).backend
    assert backend.model == "mock"
    assert backend.raw == {"provider": "mock"}
    assert backend.settings == MockSettings()
    assert (backend.settings.seed, backend.settings.position_bias) == (0, 0.0)
    assert backend.settings.default is None and backend.settings.model_version is None


def test_mock_tolerance_follows_evaluation() -> None:
    edits = {
        "evaluation.probability_tolerance": 0.02,
        "backend.default": {"spam": 0.5, "ham": 0.49},
    }
    assert _parse("spam", edits).backend.settings.default == {"spam": 0.5, "ham": 0.49}


def test_systemone_settings() -> None:
    raw = {
        "provider": "systemone",
        "url": "https://openrouter.ai/api/alpha/decisions",
        "model": "typesafe/jev-1.13",
        "bearer_token_env": "OPENROUTER_API_KEY",
        "instructions": "Is this message spam?",
    }
    backend = _parse("spam", {"backend": raw, "evaluation.probability_tolerance": 0.02}).backend
    assert isinstance(backend.settings, SystemOneSettings)
    assert backend.settings.instructions == "Is this message spam?"
    assert backend.model == "typesafe/jev-1.13"
    refund = _parse("refund", {"backends.kev": {**raw, "instructions": None}})
    assert refund.backend_config("kev").settings.instructions is None


def test_openai_defaults_follow_the_spec() -> None:
    backend = _parse("spam", {"backend": {"provider": "openai"}}).backend
    settings = backend.settings
    assert isinstance(settings, OpenAISettings)
    assert backend.model == "smollm2-135m"
    assert settings.url == "http://127.0.0.1:8765/v1"
    assert settings.health_url == "http://127.0.0.1:8765/v1/models"
    assert (settings.api_key_env, settings.readout, settings.samples) == (None, "logprobs", 8)
    assert (settings.temperature, settings.prompt, settings.max_tokens) == (0.0, None, None)
    assert (settings.timeout_s, settings.max_retries) == (60.0, 2)
    assert (settings.api, settings.options_as, settings.tokenize_url) == ("chat", "labels", None)
    assert backend.raw == {"provider": "openai"}


def test_openai_settings_as_written() -> None:
    raw = {
        "provider": "openai",
        "url": "https://api.example.com/v1/",
        "model": "gpt-x",
        "api_key_env": "OPENAI_API_KEY",
        "readout": "sample",
        "samples": 5,
        "temperature": 0.7,
        "prompt": "{description}\n{input}\nOptions:\n{options}\nLiteral {{braces}}",
        "max_tokens": 4,
    }
    backend = _parse("spam", {"backend": raw}).backend
    assert backend.settings.health_url == "https://api.example.com/v1/models"
    assert (backend.settings.readout, backend.settings.samples) == ("sample", 5)
    assert backend.model == "gpt-x"
    sequence = {**raw, "api": "completions", "readout": "sequence", "options_as": "letters",
                "tokenize_url": "https://api.example.com/tokenize"}
    settings = _parse("spam", {"backend": sequence}).backend.settings
    assert (settings.api, settings.readout, settings.options_as) == (
        "completions", "sequence", "letters")
    assert settings.tokenize_url == "https://api.example.com/tokenize"


class _EntryPoints:
    def __init__(self, groups: dict[str, list[str]]) -> None:
        self.groups = groups

    def __call__(self, *, group: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(name=name) for name in self.groups.get(group, [])]


def test_plugin_providers_come_from_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = _EntryPoints({"decflow.backends": ["acme", "mock"]})
    monkeypatch.setattr("importlib.metadata.entry_points", plugins)
    raw = {"provider": "acme", "model": "m1", "endpoint": "x", "depth": 3}
    backend = _parse("spam", {"backend": raw}).backend
    assert (backend.provider, backend.model) == ("acme", "m1")
    assert backend.settings == {"endpoint": "x", "depth": 3}
    assert backend.raw == raw
    # A plugin named like a built-in never shadows it: mock settings are still checked.
    with pytest.raises(ContractError) as caught:
        _parse("spam", {"backend": {"provider": "mock", "endpoint": "x"}})
    assert caught.value.problems == ["backend.endpoint: unknown field (check the spelling)"]
    with pytest.raises(ContractError) as caught:
        _parse("spam", {"backend": {"provider": "other"}})
    assert caught.value.problems == [
        "backend.provider: unknown provider 'other'; available: mock, http, systemone, openai, acme"
    ]


def test_plugin_paraphrasers_come_from_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "importlib.metadata.entry_points",
        _EntryPoints({"decflow.paraphrasers": ["pegasus"]}),
    )
    source = {"provider": "pegasus", "beams": 4}
    c = _parse("refund", {"properties.paraphrase.source": source})
    assert c.properties.paraphrase.source.provider == "pegasus"
    assert c.properties.paraphrase.source.model_dump() == source


def test_paraphrase_sources() -> None:
    c = _parse("refund", {"properties.paraphrase.source": {"provider": "file", "path": "p.jsonl"}})
    assert c.properties.paraphrase.source.path == "p.jsonl"
    openai = _parse(
        "refund", {"properties.paraphrase.source": {"provider": "openai", "model": "m"}}
    )
    source = openai.properties.paraphrase.source
    assert (source.url, source.api_key_env) == ("https://api.openai.com/v1", "OPENAI_API_KEY")
    assert (source.timeout_s, source.temperature) == (60.0, 0.0)


def test_property_settings_and_defaults() -> None:
    refund = _parse("refund").properties
    assert refund.option_order.samples == 3 and refund.option_order.max_flip_rate == 0.0
    assert refund.irrelevant_context.fragments == list(DEFAULT_FRAGMENTS)
    assert refund.irrelevant_context.insertions == 2
    assert refund.repeated_context.repeats == 3
    assert refund.label_format.styles[0] == "upper" and len(refund.label_format.styles) == 7
    assert refund.paraphrase.source.provider == "identity"
    assert refund.inversion is None and refund.monotonic is None
    monotonic = _parse("severity").properties.monotonic
    assert (monotonic.field, monotonic.direction) == ("affected_users", "increasing")
    assert monotonic.deltas == [100.0, 10000.0]
    assert (monotonic.max_level_decrease, monotonic.max_violation_rate) == (0.05, 0.0)


def test_enabled_properties_in_fixed_order() -> None:
    properties = {
        "counterfactual": {},
        "normalization": {"max_tv_distance": 0.02},
        "case_swap": {"max_flip_rate": 0},
        "whitespace": {"max_tv_distance": 0.1, "enabled": False},
        "inversion": {"rewrites": [{"find": " is ", "replace": " is not "}], "max_flip_rate": 0},
        "irrelevant_context": {"max_tv_distance": 0.1},
        "label_format": {"max_tv_distance": 0.1},
        "option_order": {"max_flip_rate": 0},
    }
    c = _parse("spam", {"properties": properties})
    names = [name for name, _ in c.properties.enabled()]
    assert names == [
        "option_order",
        "label_format",
        "irrelevant_context",
        "inversion",
        "case_swap",
        "normalization",
        "counterfactual",
    ]
    assert names == [n for n in PROPERTIES.names() if n in properties and n != "whitespace"]
    assert c.properties.whitespace is not None and not c.properties.whitespace.enabled
    assert dict(c.properties.enabled())["case_swap"].samples == 1


def test_counterfactual_defaults_follow_the_spec() -> None:
    cf = _parse("spam", {"properties.counterfactual": {}}).properties.counterfactual
    assert cf == Counterfactual()
    assert cf.dimensions == ["gender", "ethnicity", "religion", "role"]
    assert (cf.language, cf.catalog_seed) == ("en", 42)
    assert (cf.num_pairs_per_dimension, cf.pool_size_per_dimension) == (4, 16)
    assert (cf.persona_pairs, cf.placebo, cf.favourable_labels) == (None, True, None)
    assert (cf.max_flip_rate, cf.level, cf.enabled) == (0.05, "requirement", True)
    assert cf.template is None  # the catalogue default for the language


def test_counterfactual_as_written() -> None:
    spec = {
        "dimensions": ["role", "gender"],
        "language": "de",
        "favourable_labels": ["ham"],
        "persona_pairs": [
            {
                "axis": "gender",
                "a": {"full_name": "Anna Becker"},
                "b": {"full_name": "Lukas Becker"},
            }
        ],
        "placebo": False,
        "max_flip_rate": 0.02,
        "level": "warning",
    }
    cf = _parse("spam", {"properties.counterfactual": spec}).properties.counterfactual
    assert cf.dimensions == ["role", "gender"] and cf.language == "de"
    assert cf.persona_pairs[0].b == {"full_name": "Lukas Becker"}
    assert (cf.favourable_labels, cf.placebo, cf.max_flip_rate) == (["ham"], False, 0.02)


@pytest.mark.parametrize("decision", ["refund", "severity", "spam"])
@pytest.mark.parametrize("extension", ["case_swap", "normalization", "counterfactual"])
def test_extensions_apply_to_every_decision_type(decision: str, extension: str) -> None:
    spec = {} if extension == "counterfactual" else {"max_flip_rate": 0.0}
    c = _parse(decision, {f"properties.{extension}": spec})
    assert getattr(c.properties, extension) is not None


def test_diagnostics_defaults_follow_the_spec() -> None:
    diagnostics = _parse("spam", {"diagnostics": {"stability": {}, "blindness": {}}}).diagnostics
    assert (diagnostics.stability.repeats, diagnostics.stability.epsilon) == (6, 0.05)
    assert diagnostics.stability.level == "warning"
    assert (diagnostics.blindness.threshold, diagnostics.blindness.level) == (0.9, "warning")
    only_blindness = _parse("spam", {"diagnostics": {"blindness": {"threshold": 1}}}).diagnostics
    assert only_blindness.stability is None and only_blindness.blindness.threshold == 1.0
