"""Every invalid contract is rejected with a message naming the field (table-driven).

Rows of the reference's "Invalid combinations" table use the example messages shown there.
"""

from __future__ import annotations

from typing import Any

import pytest

from decflow.contracts import parse_contract
from decflow.errors import ContractError, DecflowError
from tests.support.contracts import DELETE, edited

SYSTEMONE = {"provider": "systemone", "url": "http://127.0.0.1:9/v1/systemone", "model": "m"}
HTTP = {"provider": "http", "url": "http://127.0.0.1:8080/decide"}

# (id, example, edits, expected substring of one problem line)
COMBINATIONS: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "coverage_without_threshold",
        "refund",
        {"evaluation.confidence_threshold": None},
        "requirements.min_coverage needs evaluation.confidence_threshold to be set",
    ),
    (
        "abstention_warning_without_threshold",
        "spam",
        {"warnings.max_abstention_rate": 0.2},
        "warnings.max_abstention_rate needs evaluation.confidence_threshold to be set",
    ),
    (
        "selective_accuracy_without_threshold",
        "spam",
        {"requirements.min_selective_accuracy": 0.9},
        "requirements.min_selective_accuracy needs evaluation.confidence_threshold to be set",
    ),
    (
        "production_threshold_coverage",
        "spam",
        {"production.requirements.min_threshold_coverage": 0.5},
        "production min_threshold_coverage needs evaluation.confidence_threshold to be set",
    ),
    (
        "production_segment_threshold_coverage",
        "spam",
        {"production.segment_warnings.min_threshold_coverage": 0.5},
        "production.segment_warnings.min_threshold_coverage: production min_threshold_coverage",
    ),
    (
        "ordinal_mae_on_noul",
        "spam",
        {"requirements.max_ordinal_mae": 0.3},
        "requirements.max_ordinal_mae only applies to score decisions",
    ),
    (
        "ordinal_mae_warning_on_choice",
        "refund",
        {"warnings.max_ordinal_mae": 0.3},
        "warnings.max_ordinal_mae only applies to score decisions",
    ),
    (
        "option_order_on_score",
        "severity",
        {"properties.option_order": {"max_tv_distance": 0.1}},
        "properties.option_order applies to choice and noul decisions, not score",
    ),
    (
        "inversion_on_choice",
        "refund",
        {
            "properties.inversion": {
                "rewrites": [{"find": "a", "replace": "b"}],
                "max_tv_distance": 0.1,
            }
        },
        "properties.inversion applies to noul decisions, not choice",
    ),
    (
        "monotonic_on_noul",
        "spam",
        {"properties.monotonic": {"field": "n"}},
        "properties.monotonic applies to score decisions, not noul",
    ),
    (
        "property_without_limit",
        "refund",
        {"properties.whitespace": {"edits": 2}},
        "properties.whitespace: set at least one of max_tv_distance, max_js_divergence, "
        "max_abs_delta, max_confidence_delta or max_flip_rate",
    ),
    (
        "disabled_property_still_needs_limit",
        "spam",
        {"properties.label_format": {"enabled": False}},
        "properties.label_format: set at least one of",
    ),
    (
        "case_swap_without_limit",
        "spam",
        {"properties.case_swap": {}},
        "properties.case_swap: set at least one of",
    ),
    (
        "normalization_without_limit",
        "severity",
        {"properties.normalization": {"level": "warning"}},
        "properties.normalization: set at least one of",
    ),
    (
        "aliases_for_unknown_labels",
        "spam",
        {"properties.label_format.aliases": {"junk": ["rubbish"], "ham": ["legit"]}},
        "properties.label_format.aliases: unknown labels ['junk']",
    ),
    (
        "segment_drop_without_segment_by",
        "refund",
        {"regression.segment_by": [], "regression.max_segment_accuracy_drop": 0.1},
        "max_segment_accuracy_drop needs segment_by (case metadata keys)",
    ),
    (
        "segment_drop_warning_without_segment_by",
        "spam",
        {"regression.warnings.max_segment_accuracy_drop": 0.1},
        "regression.warnings.max_segment_accuracy_drop needs segment_by",
    ),
    (
        "backend_named_default",
        "refund",
        {"backends.default": {"provider": "mock"}},
        "backends.default: 'default' is reserved for the top-level 'backend'",
    ),
    (
        "final_route_conditional",
        "refund",
        {"policy.routes.2.when": {"confidence_gte": 0.1}},
        "policy.routes.2.when: the final route must be unconditional",
    ),
    (
        "earlier_route_unconditional",
        "refund",
        {"policy.routes.0.when": DELETE},
        "policy.routes.0: only the last route may omit 'when' (the final route must be "
        "unconditional)",
    ),
    (
        "thresholds_not_descending",
        "refund",
        {"policy.routes.1.when.confidence_gte": 0.95},
        "policy.routes.1.when.confidence_gte: confidence_gte thresholds must be strictly "
        "descending",
    ),
    (
        "fallback_without_backend",
        "refund",
        {"policy.routes.1.backend": DELETE},
        "policy.routes.1: fallback routes require 'backend'",
    ),
    (
        "backend_on_accept_route",
        "refund",
        {"policy.routes.0.backend": "strong_model"},
        "policy.routes.0.backend: only fallback routes name a backend",
    ),
    (
        "undeclared_policy_backend",
        "refund",
        {"policy.routes.1.backend": "x"},
        "policy.routes.1.backend: unknown backend 'x'; the contract defines: default, "
        "order_sensitive, strong_model, staging",
    ),
    (
        "systemone_without_model",
        "refund",
        {"backends.s1": {**SYSTEMONE, "model": None}},
        "backends.s1.model: systemone backend 's1': 'model' is required",
    ),
    (
        "systemone_default_without_model",
        "refund",
        {"backend": {k: v for k, v in SYSTEMONE.items() if k != "model"}},
        "backend.model: systemone backend 'default': 'model' is required",
    ),
    (
        "systemone_without_question",
        "spam",
        {"backend": SYSTEMONE},
        "backend: systemone backend 'default': set decision.description or 'instructions'",
    ),
    (
        "label_map_foreign_targets",
        "refund",
        {"backends.staging.label_map": {"yes": "refund", "no": "refuse"}},
        "backends.staging.label_map: label_map targets ['refuse'] are not contract labels",
    ),
    (
        "label_map_two_to_one",
        "refund",
        {"backends.staging.label_map": {"a": "refund", "b": "refund"}},
        "backends.staging.label_map: label_map maps two backend labels to each of ['refund']",
    ),
    (
        "label_map_systemone_noul",
        "spam",
        {"backend": {**SYSTEMONE, "instructions": "Is it spam?", "label_map": {"y": "spam"}}},
        "backend.label_map: label_map does not apply to noul decisions",
    ),
    (
        "literal_authorization_header",
        "refund",
        {"backends.staging.headers": {"Authorization": "Bearer abc"}},
        "backends.staging.headers.Authorization: 'Authorization' looks like a credential;",
    ),
    (
        "literal_api_key_header",
        "refund",
        {"backends.staging.headers": {"x-api-key": "abc"}},
        "'x-api-key' looks like a credential;",
    ),
    (
        "literal_proxy_authorization_systemone",
        "refund",
        {"backends.s1": {**SYSTEMONE, "headers": {"Proxy-Authorization": "x"}}},
        "backends.s1.headers.Proxy-Authorization: 'Proxy-Authorization' looks like a credential",
    ),
    (
        "credentials_in_url",
        "refund",
        {"backends.staging.url": "http://user:secret@localhost:8080/decide"},
        "backends.staging.url: credentials in the URL",
    ),
    (
        "credential_query_parameter",
        "refund",
        {"backends.staging.url": "http://localhost:8080/decide?Api_Key=abc"},
        "backends.staging.url: query parameter 'Api_Key' looks like a credential",
    ),
    (
        "credential_query_in_health_url",
        "refund",
        {"backends.staging.health_url": "http://localhost:8080/h?token=1"},
        "backends.staging.health_url: query parameter 'token' looks like a credential",
    ),
    (
        "bearer_and_env_authorization",
        "refund",
        {"backends.staging.headers_from_env": {"authorization": "AUTH"}},
        "backends.staging: set either bearer_token_env or an Authorization header, not both",
    ),
    (
        "health_url_other_host_with_bearer",
        "refund",
        {"backends.staging.health_url": "http://example.org:8080/healthz"},
        "backends.staging: health_url must use the backend URL's origin",
    ),
    (
        "health_url_other_port_with_env_headers",
        "refund",
        {
            "backends.h": {
                **HTTP,
                "headers_from_env": {"X-Key": "K"},
                "health_url": "http://127.0.0.1:8081/",
            }
        },
        "backends.h: health_url must use the backend URL's origin",
    ),
    (
        "openai_health_url_other_origin_with_key",
        "spam",
        {"backend": {"provider": "openai", "api_key_env": "K", "health_url": "http://x:1/models"}},
        "backend: health_url must use the backend URL's origin",
    ),
    (
        "openai_tokenize_url_other_origin_with_key",
        "spam",
        {"backend": {"provider": "openai", "api_key_env": "K",
                     "tokenize_url": "http://x:1/tokenize"}},
        "backend: tokenize_url must use the backend URL's origin",
    ),
]

# (id, example, edits, exact problem line)
FIELDS: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "unknown_gate",
        "refund",
        {"requirements.min_acuracy": 0.9},
        "requirements.min_acuracy: unknown field (check the spelling)",
    ),
    (
        "unknown_top_level",
        "spam",
        {"requirement": {}},
        "requirement: unknown field (check the spelling)",
    ),
    (
        "unknown_property",
        "spam",
        {"properties.option_ordre": {}},
        "properties.option_ordre: unknown field (check the spelling)",
    ),
    (
        "unknown_property_key",
        "refund",
        {"properties.option_order.sample": 2},
        "properties.option_order.sample: unknown field (check the spelling)",
    ),
    (
        "per_case_limit_on_monotonic",
        "severity",
        {"properties.monotonic.max_tv_distance": 0.1},
        "properties.monotonic.max_tv_distance: unknown field (check the spelling)",
    ),
    ("unknown_fuzz_key", "spam", {"fuzz.sed": 1}, "fuzz.sed: unknown field (check the spelling)"),
    (
        "unknown_route_key",
        "refund",
        {"policy.routes.0.when.confidence": 0.9},
        "policy.routes.0.when.confidence: unknown field (check the spelling)",
    ),
    (
        "unknown_mock_setting",
        "refund",
        {"backend.timeout_s": 3},
        "backend.timeout_s: unknown field (check the spelling)",
    ),
    (
        "unknown_http_setting",
        "refund",
        {"backends.staging.timeot_s": 3},
        "backends.staging.timeot_s: unknown field (check the spelling)",
    ),
    (
        "unknown_regression_warning",
        "spam",
        {"regression.warnings.max_flip": 0.1},
        "regression.warnings.max_flip: unknown field (check the spelling)",
    ),
    (
        "drift_gate_per_segment",
        "refund",
        {"production.segment_requirements.max_ece_increase": 0.1},
        "production.segment_requirements.max_ece_increase: unknown field (check the spelling)",
    ),
    (
        "bool_as_number",
        "refund",
        {"requirements.min_accuracy": True},
        "requirements.min_accuracy: expected a number, got a boolean",
    ),
    (
        "bool_as_integer",
        "refund",
        {"fuzz.seed": False},
        "fuzz.seed: expected an integer, got a boolean",
    ),
    (
        "string_as_number",
        "refund",
        {"evaluation.confidence_threshold": "0.8"},
        "evaluation.confidence_threshold: expected a number, got the string '0.8' (remove the "
        "quotes)",
    ),
    (
        "float_as_integer",
        "spam",
        {"evaluation.calibration_bins": 10.0},
        "evaluation.calibration_bins: expected an integer, got the number 10.0",
    ),
    (
        "float_samples",
        "refund",
        {"properties.option_order.samples": 2.5},
        "properties.option_order.samples: expected an integer, got the number 2.5",
    ),
    (
        "nan_gate",
        "spam",
        {"requirements.max_brier": float("nan")},
        "requirements.max_brier: must be a finite number, got nan",
    ),
    (
        "string_as_bool",
        "spam",
        {"fuzz.minimize": "yes"},
        "fuzz.minimize: expected true or false, got the string 'yes'",
    ),
    (
        "gate_above_one",
        "spam",
        {"requirements.min_accuracy": 1.5},
        "requirements.min_accuracy: must be at most 1.0, got 1.5",
    ),
    (
        "brier_above_two",
        "spam",
        {"warnings.max_brier": 2.5},
        "warnings.max_brier: must be at most 2.0, got 2.5",
    ),
    (
        "negative_nll",
        "spam",
        {"requirements.max_nll": -0.1},
        "requirements.max_nll: must be at least 0.0, got -0.1",
    ),
    (
        "negative_latency",
        "spam",
        {"warnings.max_latency_p95_ms": -1},
        "warnings.max_latency_p95_ms: must be at least 0.0, got -1",
    ),
    (
        "tolerance_zero",
        "spam",
        {"evaluation.probability_tolerance": 0},
        "evaluation.probability_tolerance: must be greater than 0.0, got 0",
    ),
    (
        "tolerance_too_big",
        "spam",
        {"evaluation.probability_tolerance": 0.2},
        "evaluation.probability_tolerance: must be at most 0.1, got 0.2",
    ),
    (
        "bins_too_many",
        "spam",
        {"evaluation.calibration_bins": 1001},
        "evaluation.calibration_bins: must be at most 1000, got 1001",
    ),
    (
        "concurrency_zero",
        "spam",
        {"evaluation.max_concurrency": 0},
        "evaluation.max_concurrency: must be at least 1, got 0",
    ),
    (
        "concurrency_too_high",
        "spam",
        {"evaluation.max_concurrency": 257},
        "evaluation.max_concurrency: must be at most 256, got 257",
    ),
    (
        "threshold_above_one",
        "refund",
        {"evaluation.confidence_threshold": 1.2},
        "evaluation.confidence_threshold: must be at most 1.0, got 1.2",
    ),
    ("negative_seed", "spam", {"fuzz.seed": -1}, "fuzz.seed: must be at least 0, got -1"),
    (
        "huge_seed",
        "spam",
        {"fuzz.seed": 2**63},
        f"fuzz.seed: must be less than {2**63}, got {2**63}",
    ),
    (
        "minimize_calls",
        "spam",
        {"fuzz.max_minimize_calls": 1001},
        "fuzz.max_minimize_calls: must be at most 1000, got 1001",
    ),
    ("empty_text_field", "spam", {"fuzz.text_field": ""}, "fuzz.text_field: must not be empty"),
    (
        "option_order_samples",
        "refund",
        {"properties.option_order.samples": 0},
        "properties.option_order.samples: must be at least 1, got 0",
    ),
    (
        "label_format_samples",
        "spam",
        {"properties.label_format.samples": 101},
        "properties.label_format.samples: must be at most 100, got 101",
    ),
    (
        "unknown_style",
        "spam",
        {"properties.label_format.styles": ["upper", "shouty"]},
        "properties.label_format.styles.1: must be one of",
    ),
    (
        "duplicate_style",
        "spam",
        {"properties.label_format.styles": ["upper", "upper"]},
        "properties.label_format.styles: entries must be unique; duplicated: ['upper']",
    ),
    (
        "empty_alias",
        "spam",
        {"properties.label_format.aliases": {"spam": [""]}},
        "properties.label_format.aliases.spam.0: must not be empty",
    ),
    (
        "insertions",
        "refund",
        {"properties.irrelevant_context.insertions": 11},
        "properties.irrelevant_context.insertions: must be at most 10, got 11",
    ),
    (
        "empty_fragments",
        "refund",
        {"properties.irrelevant_context.fragments": []},
        "properties.irrelevant_context.fragments: needs at least 1 item(s), got 0",
    ),
    (
        "blank_fragment",
        "refund",
        {"properties.repeated_context.fragments": ["  "]},
        "properties.repeated_context.fragments.0: must contain text, not only whitespace",
    ),
    (
        "repeats",
        "refund",
        {"properties.repeated_context.repeats": 1},
        "properties.repeated_context.repeats: must be at least 2, got 1",
    ),
    (
        "edits",
        "refund",
        {"properties.whitespace.edits": 21},
        "properties.whitespace.edits: must be at most 20, got 21",
    ),
    (
        "paraphrase_samples",
        "refund",
        {"properties.paraphrase.samples": 21},
        "properties.paraphrase.samples: must be at most 20, got 21",
    ),
    (
        "paraphrase_file_without_path",
        "refund",
        {"properties.paraphrase.source": {"provider": "file"}},
        "properties.paraphrase.source.path: required field is missing",
    ),
    (
        "paraphrase_identity_extra",
        "refund",
        {"properties.paraphrase.source": {"provider": "identity", "path": "x"}},
        "properties.paraphrase.source.path: unknown field (check the spelling)",
    ),
    (
        "paraphrase_openai_without_model",
        "refund",
        {"properties.paraphrase.source": {"provider": "openai"}},
        "properties.paraphrase.source.model: required field is missing",
    ),
    (
        "paraphrase_unknown_provider",
        "refund",
        {"properties.paraphrase.source": {"provider": "magic"}},
        "properties.paraphrase.source: unknown paraphrase provider 'magic'; available: identity, "
        "file, openai",
    ),
    (
        "paraphrase_source_string",
        "refund",
        {"properties.paraphrase.source": "identity"},
        "properties.paraphrase.source: expected a mapping with a 'provider', got the string "
        "'identity'",
    ),
    (
        "inversion_without_rewrites",
        "spam",
        {"properties.inversion": {"max_flip_rate": 0}},
        "properties.inversion.rewrites: required field is missing",
    ),
    (
        "inversion_empty_find",
        "spam",
        {"properties.inversion": {"rewrites": [{"find": "", "replace": "x"}], "max_flip_rate": 0}},
        "properties.inversion.rewrites.0.find: must not be empty",
    ),
    (
        "monotonic_without_field",
        "severity",
        {"properties.monotonic.field": DELETE},
        "properties.monotonic.field: required field is missing",
    ),
    (
        "monotonic_zero_delta",
        "severity",
        {"properties.monotonic.deltas": [1, 0]},
        "properties.monotonic.deltas.1: must be greater than 0.0, got 0",
    ),
    (
        "monotonic_direction",
        "severity",
        {"properties.monotonic.direction": "up"},
        "properties.monotonic.direction: must be one of 'increasing' or 'decreasing', got the "
        "string 'up'",
    ),
    (
        "monotonic_decrease",
        "severity",
        {"properties.monotonic.max_level_decrease": -0.1},
        "properties.monotonic.max_level_decrease: must be at least 0.0, got -0.1",
    ),
    (
        "property_level",
        "spam",
        {"properties.label_format.level": "fatal"},
        "properties.label_format.level: must be one of 'requirement' or 'warning', got the string "
        "'fatal'",
    ),
    (
        "violation_rate",
        "spam",
        {"properties.label_format.max_violation_rate": 1.1},
        "properties.label_format.max_violation_rate: must be at most 1.0, got 1.1",
    ),
    (
        "segment_size",
        "refund",
        {"regression.min_segment_size": 0},
        "regression.min_segment_size: must be at least 1, got 0",
    ),
    (
        "duplicate_segments",
        "refund",
        {"production.segments": ["locale", "locale"]},
        "production.segments: entries must be unique; duplicated: ['locale']",
    ),
    (
        "empty_routes",
        "refund",
        {"policy.routes": []},
        "policy.routes: needs at least 1 item(s), got 0",
    ),
    (
        "route_action",
        "refund",
        {"policy.routes.2.action": "escalate"},
        "policy.routes.2.action: must be one of",
    ),
    (
        "route_threshold_range",
        "refund",
        {"policy.routes.0.when.confidence_gte": 1.5},
        "policy.routes.0.when.confidence_gte: must be at most 1.0, got 1.5",
    ),
    (
        "dataset_not_string",
        "spam",
        {"dataset": 3},
        "dataset: expected a non-empty path string, got the number 3",
    ),
    (
        "decision_type",
        "spam",
        {"decision.type": "binary"},
        "decision.type: must be one of choice, noul, score; got the string 'binary'",
    ),
    (
        "decision_without_type",
        "spam",
        {"decision.type": DELETE},
        "decision.type: required field is missing (choice, noul or score)",
    ),
    (
        "decision_without_name",
        "spam",
        {"decision.name": DELETE},
        "decision.name: required field is missing",
    ),
    (
        "decision_bad_name",
        "spam",
        {"decision.name": "is spam"},
        "decision.name: 'is spam' is not a valid name",
    ),
    (
        "decision_unknown_key",
        "spam",
        {"decision.question": "q"},
        "decision.question: unknown field (check the spelling)",
    ),
    (
        "labels_on_choice",
        "refund",
        {"decision.labels": ["a", "b"]},
        "decision.labels: only noul decisions take 'labels'; a choice decision lists its labels "
        "under 'options'",
    ),
    (
        "options_on_score",
        "severity",
        {"decision.options": ["a", "b"]},
        "decision.options: only choice decisions take 'options'",
    ),
    (
        "choice_one_option",
        "refund",
        {"decision.options": ["refund"]},
        "decision.options: needs at least 2 item(s), got 1",
    ),
    (
        "choice_without_options",
        "refund",
        {"decision.options": DELETE},
        "decision.options: required field is missing",
    ),
    (
        "duplicate_options",
        "refund",
        {"decision.options": ["refund", "reject", "refund"]},
        "decision.options: entries must be unique; duplicated: ['refund']",
    ),
    (
        "spaced_label",
        "refund",
        {"decision.options": ["refund", "reject", "review "]},
        "decision.options.2: 'review ' has surrounding spaces",
    ),
    (
        "empty_label",
        "spam",
        {"decision.labels": ["spam", ""]},
        "decision.labels.1: must not be empty",
    ),
    (
        "numeric_option",
        "refund",
        {"decision.options": ["refund", 2]},
        "decision.options.1: expected a string, got the number 2",
    ),
    (
        "noul_three_labels",
        "spam",
        {"decision.labels": ["a", "b", "c"]},
        "decision.labels: a noul decision has exactly 2 labels (positive first), got 3",
    ),
    (
        "score_one_level",
        "severity",
        {"decision.levels": [1]},
        "decision.levels: needs at least 2 item(s), got 1",
    ),
    (
        "score_duplicate_levels",
        "severity",
        {"decision.levels": [1, "1", 2]},
        "decision.levels: entries must be unique; duplicated: ['1']",
    ),
    (
        "score_bool_level",
        "severity",
        {"decision.levels": [True, False]},
        "decision.levels.0: expected a string, got a boolean",
    ),
    (
        "missing_backend",
        "spam",
        {"backend": DELETE},
        "backend: required field is missing (the default backend)",
    ),
    (
        "backend_not_mapping",
        "spam",
        {"backend": "mock"},
        "backend: expected a mapping with 'provider', got the string 'mock'",
    ),
    (
        "backend_without_provider",
        "spam",
        {"backend.provider": DELETE},
        "backend.provider: required field is missing",
    ),
    (
        "unknown_provider",
        "spam",
        {"backend.provider": "magic"},
        "backend.provider: unknown provider 'magic'; available: mock, http, systemone, openai",
    ),
    (
        "python_provider",
        "spam",
        {"backend": {"provider": "python"}},
        "backend.provider: 'python' backends are for library use only; contracts never name "
        "Python code",
    ),
    (
        "bad_backend_name",
        "refund",
        {"backends.-staging": {"provider": "mock"}},
        "backends.-staging: invalid backend name",
    ),
    (
        "empty_model",
        "spam",
        {"backend.model": ""},
        "backend.model: expected a non-empty string, got the string ''",
    ),
    (
        "mock_sum",
        "spam",
        {"backend.default": {"spam": 0.5, "ham": 0.49}},
        "backend.default: probabilities sum to 0.99, outside 1 ± 0.001",
    ),
    (
        "mock_sum_tolerance",
        "spam",
        {"evaluation.probability_tolerance": 0.02, "backend.default": {"spam": 0.5, "ham": 0.47}},
        "backend.default: probabilities sum to 0.97, outside 1 ± 0.02",
    ),
    (
        "mock_missing_label",
        "refund",
        {"backend.default": {"refund": 0.5, "reject": 0.5}},
        "backend.default: missing labels ['review']; the contract labels are ['refund', 'reject', "
        "'review']",
    ),
    (
        "mock_unknown_label",
        "spam",
        {"backend.rules.0.probabilities": {"spam": 0.5, "ham": 0.4, "eggs": 0.1}},
        "backend.rules.0.probabilities: unknown labels ['eggs']",
    ),
    (
        "mock_bool_probability",
        "spam",
        {"backend.default": {"spam": True, "ham": 0}},
        "backend.default.spam: expected a number, got a boolean",
    ),
    (
        "mock_negative_probability",
        "spam",
        {"backend.default": {"spam": 1.1, "ham": -0.1}},
        "backend.default.ham: must be at least 0.0, got -0.1",
    ),
    (
        "mock_empty_contains",
        "spam",
        {"backend.rules.0.contains": ""},
        "backend.rules.0.contains: must not be empty",
    ),
    (
        "mock_position_bias",
        "refund",
        {"backends.order_sensitive.position_bias": 1.5},
        "backends.order_sensitive.position_bias: must be at most 1.0, got 1.5",
    ),
    (
        "mock_float_seed",
        "spam",
        {"backend.seed": 1.0},
        "backend.seed: expected an integer, got the number 1.0",
    ),
    (
        "mock_int_keys",
        "severity",
        {"backend.default": {1: 0.5, 2: 0.5}},
        "backend.default.1: keys must be strings, got the number 1 (quote it)",
    ),
    (
        "http_without_url",
        "refund",
        {"backends.staging.url": DELETE},
        "backends.staging.url: required field is missing",
    ),
    (
        "http_relative_url",
        "refund",
        {"backends.staging.url": "/decide"},
        "backends.staging.url: must be an absolute http or https URL with a host, got '/decide'",
    ),
    (
        "http_ftp_url",
        "refund",
        {"backends.staging.url": "ftp://host/x"},
        "backends.staging.url: must be an absolute http or https URL",
    ),
    (
        "http_timeout_zero",
        "refund",
        {"backends.staging.timeout_s": 0},
        "backends.staging.timeout_s: must be greater than 0.0, got 0",
    ),
    (
        "http_timeout_high",
        "refund",
        {"backends.staging.timeout_s": 601},
        "backends.staging.timeout_s: must be at most 600.0, got 601",
    ),
    (
        "http_retries",
        "refund",
        {"backends.staging.max_retries": 6},
        "backends.staging.max_retries: must be at most 5, got 6",
    ),
    (
        "http_backoff",
        "refund",
        {"backends.staging.retry_backoff_s": 61},
        "backends.staging.retry_backoff_s: must be at most 60.0, got 61",
    ),
    (
        "http_bad_env_name",
        "refund",
        {"backends.staging.bearer_token_env": "MY-TOKEN"},
        "backends.staging.bearer_token_env: 'MY-TOKEN' is not an environment variable name",
    ),
    (
        "http_bad_header_name",
        "refund",
        {"backends.staging.headers": {"X Trace": "1"}},
        "backends.staging.headers.X Trace: 'X Trace' is not a valid HTTP header name",
    ),
    (
        "openai_unknown_key",
        "spam",
        {"backend": {"provider": "openai", "n": 2}},
        "backend.n: unknown field (check the spelling)",
    ),
    (
        "openai_readout",
        "spam",
        {"backend": {"provider": "openai", "readout": "logits"}},
        "backend.readout: must be one of 'logprobs', 'sequence' or 'sample', got the string "
        "'logits'",
    ),
    (
        "openai_sequence_on_chat",
        "spam",
        {"backend": {"provider": "openai", "readout": "sequence"}},
        "backend.readout: readout 'sequence' needs api: completions",
    ),
    (
        "openai_api",
        "spam",
        {"backend": {"provider": "openai", "api": "responses"}},
        "backend.api: must be one of 'chat' or 'completions', got the string 'responses'",
    ),
    (
        "openai_options_as",
        "spam",
        {"backend": {"provider": "openai", "options_as": "numbers"}},
        "backend.options_as: must be one of 'labels' or 'letters', got the string 'numbers'",
    ),
    (
        "openai_letters_for_too_many_labels",
        "severity",
        {"decision.levels": list(range(27)),
         "backend": {"provider": "openai", "options_as": "letters"}},
        "backend.options_as: options_as 'letters' codes at most 26 options (A-Z); the decision "
        "has 27 labels",
    ),
    (
        "openai_tokenize_url",
        "spam",
        {"backend": {"provider": "openai", "tokenize_url": "localhost:8765/tokenize"}},
        "backend.tokenize_url: must be an absolute http or https URL",
    ),
    (
        "openai_samples",
        "spam",
        {"backend": {"provider": "openai", "samples": 0}},
        "backend.samples: must be at least 1, got 0",
    ),
    (
        "openai_temperature",
        "spam",
        {"backend": {"provider": "openai", "temperature": 2.5}},
        "backend.temperature: must be at most 2.0, got 2.5",
    ),
    (
        "openai_prompt_placeholder",
        "spam",
        {"backend": {"provider": "openai", "prompt": "{description} {label}"}},
        "backend.prompt: unknown placeholders ['label']; the prompt may use {description}, "
        "{input}, {options}",
    ),
    (
        "openai_prompt_braces",
        "spam",
        {"backend": {"provider": "openai", "prompt": "{input"}},
        "backend.prompt: invalid template",
    ),
    (
        "openai_url_credentials",
        "spam",
        {"backend": {"provider": "openai", "url": "https://k:s@api.example.com/v1"}},
        "backend.url: credentials in the URL",
    ),
    (
        "openai_max_tokens",
        "spam",
        {"backend": {"provider": "openai", "max_tokens": 0}},
        "backend.max_tokens: must be at least 1, got 0",
    ),
]

# decflow extensions (PRODUCT.md §4): same strictness as schema 0.1.
EXTENSIONS: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "production_gating_value",
        "refund",
        {"production.gating": "bayes"},
        "production.gating: must be one of 'evidence' or 'point', got the string 'bayes'",
    ),
    (
        "monitor_unknown",
        "refund",
        {"monitor": {"windows": "1d"}},
        "monitor.windows: unknown field (check the spelling)",
    ),
    (
        "monitor_window",
        "refund",
        {"monitor": {"window": "2d"}},
        "monitor.window: must be one of '1h', '6h', '1d' or '7d'",
    ),
    (
        "harmful_shift_metric",
        "refund",
        {"monitor": {"harmful_shift": {"metric": "nll"}}},
        "monitor.harmful_shift.metric: must be one of 'error_rate' or 'brier'",
    ),
    (
        "harmful_shift_tolerance_string",
        "refund",
        {"monitor": {"harmful_shift": {"tolerance": "0.02"}}},
        "monitor.harmful_shift.tolerance: expected a number",
    ),
    (
        "harmful_shift_alpha",
        "refund",
        {"monitor": {"harmful_shift": {"alpha": 0.0}}},
        "monitor.harmful_shift.alpha: must be greater than 0.0",
    ),
    (
        "harmful_shift_horizon",
        "refund",
        {"monitor": {"harmful_shift": {"horizon": 0}}},
        "monitor.harmful_shift.horizon: must be at least 1",
    ),
    (
        "diagnostics_unknown",
        "spam",
        {"diagnostics.meter": {}},
        "diagnostics.meter: unknown field (check the spelling)",
    ),
    (
        "stability_unknown",
        "spam",
        {"diagnostics.stability": {"k": 5}},
        "diagnostics.stability.k: unknown field (check the spelling)",
    ),
    (
        "stability_repeats",
        "spam",
        {"diagnostics.stability": {"repeats": 1}},
        "diagnostics.stability.repeats: must be at least 2, got 1",
    ),
    (
        "stability_repeats_float",
        "spam",
        {"diagnostics.stability": {"repeats": 6.0}},
        "diagnostics.stability.repeats: expected an integer, got the number 6.0",
    ),
    (
        "stability_epsilon_zero",
        "spam",
        {"diagnostics.stability": {"epsilon": 0}},
        "diagnostics.stability.epsilon: must be greater than 0.0, got 0",
    ),
    (
        "stability_epsilon_one",
        "spam",
        {"diagnostics.stability": {"epsilon": 1}},
        "diagnostics.stability.epsilon: must be less than 1.0, got 1",
    ),
    (
        "stability_level",
        "spam",
        {"diagnostics.stability": {"level": "error"}},
        "diagnostics.stability.level: must be one of 'requirement' or 'warning'",
    ),
    (
        "blindness_zero",
        "spam",
        {"diagnostics.blindness": {"threshold": 0}},
        "diagnostics.blindness.threshold: must be greater than 0.0, got 0",
    ),
    (
        "blindness_above_one",
        "spam",
        {"diagnostics.blindness": {"threshold": 1.01}},
        "diagnostics.blindness.threshold: must be at most 1.0, got 1.01",
    ),
    (
        "blindness_bool",
        "spam",
        {"diagnostics.blindness": {"threshold": True}},
        "diagnostics.blindness.threshold: expected a number, got a boolean",
    ),
    (
        "diagnostics_not_mapping",
        "spam",
        {"diagnostics": [1]},
        "diagnostics: expected a mapping, got a list",
    ),
    (
        "case_swap_unknown",
        "spam",
        {"properties.case_swap": {"max_flip_rate": 0, "mode": "upper"}},
        "properties.case_swap.mode: unknown field (check the spelling)",
    ),
    (
        "case_swap_samples",
        "spam",
        {"properties.case_swap": {"max_flip_rate": 0, "samples": 0}},
        "properties.case_swap.samples: must be at least 1, got 0",
    ),
    (
        "case_swap_flip_rate",
        "spam",
        {"properties.case_swap": {"max_flip_rate": 2}},
        "properties.case_swap.max_flip_rate: must be at most 1.0, got 2",
    ),
    (
        "normalization_tv",
        "refund",
        {"properties.normalization": {"max_tv_distance": 1.5}},
        "properties.normalization.max_tv_distance: must be at most 1.0, got 1.5",
    ),
    (
        "normalization_bool_limit",
        "refund",
        {"properties.normalization": {"max_js_divergence": False}},
        "properties.normalization.max_js_divergence: expected a number, got a boolean",
    ),
    (
        "counterfactual_flip_rate_zero",
        "spam",
        {"properties.counterfactual": {"max_flip_rate": 0}},
        "properties.counterfactual.max_flip_rate: must be greater than 0.0, got 0",
    ),
    (
        "counterfactual_flip_rate_one",
        "spam",
        {"properties.counterfactual": {"max_flip_rate": 1}},
        "properties.counterfactual.max_flip_rate: must be less than 1.0, got 1",
    ),
    (
        "counterfactual_unknown",
        "spam",
        {"properties.counterfactual": {"axes": ["gender"]}},
        "properties.counterfactual.axes: unknown field (check the spelling)",
    ),
    (
        "counterfactual_dimension",
        "spam",
        {"properties.counterfactual": {"dimensions": ["gender", "age"]}},
        "properties.counterfactual.dimensions.1: must be one of 'gender', 'ethnicity', 'religion' "
        "or 'role', got the string 'age'",
    ),
    (
        "counterfactual_no_dimensions",
        "spam",
        {"properties.counterfactual": {"dimensions": []}},
        "properties.counterfactual.dimensions: needs at least 1 item(s), got 0",
    ),
    (
        "counterfactual_duplicate_dimension",
        "spam",
        {"properties.counterfactual": {"dimensions": ["role", "role"]}},
        "properties.counterfactual.dimensions: entries must be unique; duplicated: ['role']",
    ),
    (
        "counterfactual_language",
        "spam",
        {"properties.counterfactual": {"language": "fr"}},
        "properties.counterfactual.language: must be one of 'en' or 'de', got the string 'fr'",
    ),
    (
        "counterfactual_seed",
        "spam",
        {"properties.counterfactual": {"catalog_seed": 4.2}},
        "properties.counterfactual.catalog_seed: expected an integer, got the number 4.2",
    ),
    (
        "counterfactual_pairs_zero",
        "spam",
        {"properties.counterfactual": {"num_pairs_per_dimension": 0}},
        "properties.counterfactual.num_pairs_per_dimension: must be at least 1, got 0",
    ),
    (
        "counterfactual_pairs_high",
        "spam",
        {"properties.counterfactual": {"num_pairs_per_dimension": 17}},
        "properties.counterfactual.num_pairs_per_dimension: must be at most 16, got 17",
    ),
    (
        "counterfactual_pool_zero",
        "spam",
        {"properties.counterfactual": {"pool_size_per_dimension": 0}},
        "properties.counterfactual.pool_size_per_dimension: must be at least 1, got 0",
    ),
    (
        "counterfactual_pool_high",
        "spam",
        {"properties.counterfactual": {"pool_size_per_dimension": 65}},
        "properties.counterfactual.pool_size_per_dimension: must be at most 64, got 65",
    ),
    (
        "counterfactual_placebo",
        "spam",
        {"properties.counterfactual": {"placebo": "yes"}},
        "properties.counterfactual.placebo: expected true or false, got the string 'yes'",
    ),
    (
        "counterfactual_flip_rate",
        "spam",
        {"properties.counterfactual": {"max_flip_rate": 1.5}},
        "properties.counterfactual.max_flip_rate: must be less than 1.0, got 1.5",
    ),
    (
        "counterfactual_level",
        "spam",
        {"properties.counterfactual": {"level": "info"}},
        "properties.counterfactual.level: must be one of 'requirement' or 'warning'",
    ),
    (
        "counterfactual_favourable",
        "spam",
        {"properties.counterfactual": {"favourable_labels": ["approve"]}},
        "properties.counterfactual.favourable_labels: unknown labels ['approve']",
    ),
    (
        "counterfactual_favourable_empty",
        "spam",
        {"properties.counterfactual": {"favourable_labels": []}},
        "properties.counterfactual.favourable_labels: needs at least 1 item(s), got 0",
    ),
    (
        "counterfactual_template_positional",
        "spam",
        {"properties.counterfactual": {"template": "Applicant {0}"}},
        "properties.counterfactual.template: invalid placeholder {0}",
    ),
    (
        "counterfactual_template_no_slot",
        "spam",
        {"properties.counterfactual": {"template": "Applicant."}},
        "properties.counterfactual.template: the template needs at least one persona slot",
    ),
    (
        "persona_axis",
        "spam",
        {
            "properties.counterfactual": {
                "persona_pairs": [{"axis": "age", "a": {"age": "30"}, "b": {"age": "70"}}]
            }
        },
        "properties.counterfactual.persona_pairs.0.axis: must be one of",
    ),
    (
        "persona_slots_differ",
        "spam",
        {
            "properties.counterfactual": {
                "persona_pairs": [
                    {"axis": "gender", "a": {"first_name": "Anna"}, "b": {"full_name": "Lukas"}}
                ]
            }
        },
        "properties.counterfactual.persona_pairs.0: 'a' and 'b' must fill the same slots",
    ),
    (
        "persona_identical",
        "spam",
        {
            "properties.counterfactual": {
                "persona_pairs": [
                    {"axis": "role", "a": {"occupation": "nurse"}, "b": {"occupation": "nurse"}}
                ]
            }
        },
        "properties.counterfactual.persona_pairs.0: 'a' and 'b' are identical",
    ),
    (
        "persona_empty",
        "spam",
        {"properties.counterfactual": {"persona_pairs": [{"axis": "role", "a": {}, "b": {}}]}},
        "properties.counterfactual.persona_pairs.0.a: needs at least 1 item(s), got 0",
    ),
    (
        "persona_slot_name",
        "spam",
        {
            "properties.counterfactual": {
                "persona_pairs": [{"axis": "role", "a": {"Job": "x"}, "b": {"Job": "y"}}]
            }
        },
        "properties.counterfactual.persona_pairs.0.a.Job: 'Job' is not a slot name",
    ),
    (
        "persona_extra_key",
        "spam",
        {
            "properties.counterfactual": {
                "persona_pairs": [
                    {"axis": "role", "a": {"occupation": "x"}, "b": {"occupation": "y"}, "c": {}}
                ]
            }
        },
        "properties.counterfactual.persona_pairs.0.c: unknown field (check the spelling)",
    ),
]


def _problems(example_name: str, edits: dict[str, Any]) -> list[str]:
    with pytest.raises(ContractError) as caught:
        parse_contract(edited(example_name, edits), "contract.yaml")
    assert str(caught.value).startswith("contract.yaml: invalid contract:\n")
    return caught.value.problems


@pytest.mark.parametrize(
    ("example_name", "edits", "expected"),
    [row[1:] for row in COMBINATIONS],
    ids=[row[0] for row in COMBINATIONS],
)
def test_invalid_combinations(example_name: str, edits: dict[str, Any], expected: str) -> None:
    problems = _problems(example_name, edits)
    assert any(expected in line for line in problems), problems


@pytest.mark.parametrize(
    ("example_name", "edits", "expected"),
    [row[1:] for row in FIELDS + EXTENSIONS],
    ids=[row[0] for row in FIELDS + EXTENSIONS],
)
def test_invalid_fields(example_name: str, edits: dict[str, Any], expected: str) -> None:
    problems = _problems(example_name, edits)
    assert any(line == expected or line.startswith(expected) for line in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems(
        "refund",
        {
            "requirements.min_acuracy": 0.9,
            "evaluation.max_concurrency": 0,
            "backends.staging.timeout_s": "10",
            "properties.whitespace.edits": 0,
            "policy.routes.1.backend": "nowhere",
        },
    )
    assert problems == [
        "evaluation.max_concurrency: must be at least 1, got 0",
        "requirements.min_acuracy: unknown field (check the spelling)",
        "properties.whitespace.edits: must be at least 1, got 0",
        "backends.staging.timeout_s: expected a number, got the string '10' (remove the quotes)",
        "policy.routes.1.backend: unknown backend 'nowhere'; the contract defines: default, "
        "order_sensitive, strong_model, staging",
    ]


def test_not_a_mapping() -> None:
    with pytest.raises(ContractError) as caught:
        parse_contract(["schema_version"], "c.yaml")
    assert caught.value.problems == ["the contract must be a mapping at the top level, got a list"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.1, 'schema_version: must be the string "0.1", got the number 0.1; quote it in YAML'),
        ("0.2", "schema_version: unsupported version the string '0.2'"),
        (DELETE, 'schema_version: required field is missing (set it to "0.1")'),
    ],
)
def test_schema_version(value: Any, expected: str) -> None:
    problems = _problems("spam", {"schema_version": value})
    assert any(line.startswith(expected) for line in problems), problems


def test_contract_error_is_a_decflow_error() -> None:
    assert issubclass(ContractError, DecflowError)


def test_backends_are_checked_even_when_the_decision_is_invalid() -> None:
    problems = _problems(
        "spam",
        {"decision.type": "binary", "backend": {"provider": "systemone", "url": "http://h/x"}},
    )
    assert problems == [
        "decision.type: must be one of choice, noul, score; got the string 'binary'",
        "backend.model: systemone backend 'default': 'model' is required",
    ]
