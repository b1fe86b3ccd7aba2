"""The mock backend's exact semantics (DecGuard 0.1 reference, section (b))."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import numpy as np
import pytest

from decflow.backends.base import DecisionRequest, DecisionSpec, RequestBatch
from decflow.backends.mock import MockBackend, _one_space, label_meaning

LABELS = ("refund", "reject", "review")
RULES = [
    {"contains": "damaged", "probabilities": {"refund": 0.96, "reject": 0.01, "review": 0.03}},
    {"contains": "never  arrived", "probabilities": {"refund": 0.9, "reject": 0.02,
                                                     "review": 0.08}},
]


def mock(**settings: object) -> MockBackend:
    return MockBackend("default", None, SimpleNamespace(**settings),
                       DecisionSpec("refund", "choice", LABELS))


def decide(backend: MockBackend, value: str | dict, shown: tuple[str, ...] = LABELS,
           order: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    text = value if isinstance(value, str) else None
    from decflow.data.golden_dataset import compact_json

    obj = None if isinstance(value, str) else compact_json(value)
    batch = RequestBatch(["r"], [text], [obj], [list(shown)], np.array([order]))
    return backend.decide_batch(batch).probabilities[0]


def test_hash_fallback_matches_the_reference_vector():
    row = decide(mock(), "The blender arrived damaged and won't turn on.")
    assert row == pytest.approx([0.24812, 0.45896, 0.29291], abs=5e-6)


def test_hash_uses_label_meaning_so_reformatting_changes_nothing():
    plain = decide(mock(seed=3), "some text")
    formatted = decide(mock(seed=3), "some text", ('"refund"', "[Reject]", "C) REVIEW"))
    assert formatted.tolist() == plain.tolist()
    reordered = decide(mock(seed=3), "some text", ("C) REVIEW", '"refund"', "[Reject]"),
                       (2, 0, 1))
    assert reordered == pytest.approx(plain, rel=1e-12)  # only the summation order differs


def test_rules_match_collapsed_whitespace_and_case_first_rule_wins():
    backend = mock(rules=RULES, default={"refund": 0.2, "reject": 0.15, "review": 0.65})
    assert decide(backend, "It NEVER\n arrived and was DAMAGED") == pytest.approx([0.96, 0.01,
                                                                                  0.03])
    assert decide(backend, "Parcel never   arrived") == pytest.approx([0.9, 0.02, 0.08])
    assert decide(backend, "something else") == pytest.approx([0.2, 0.15, 0.65])


def test_object_inputs_match_on_compact_sorted_json():
    backend = mock(rules=[{"contains": '"affected_users":101',
                           "probabilities": {"refund": 1.0, "reject": 0.0, "review": 0.0}}],
                   default={"refund": 0.0, "reject": 1.0, "review": 0.0})
    assert decide(backend, {"text": "x", "affected_users": 101})[0] == 1.0
    assert decide(backend, {"text": "x", "affected_users": 102})[1] == 1.0


def test_position_bias_reference_example():
    backend = mock(rules=RULES, position_bias=0.1)
    canonical = decide(backend, "damaged")
    assert canonical == pytest.approx([0.964, 0.009, 0.027])
    reordered = decide(backend, "damaged", ("review", "reject", "refund"), (2, 1, 0))
    assert reordered == pytest.approx([0.864, 0.009, 0.127])
    assert 0.5 * np.abs(canonical - reordered).sum() == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("shown", "meaning"),
    [("REFUND", "refund"), ("B) refund", "refund"), ('"refund"', "refund"),
     ("[refund]", "refund"), ("12. refund", "refund"), ("b: Refund", "refund")],
)
def test_label_meaning(shown: str, meaning: str):
    assert label_meaning(shown) == meaning


def test_predict_answers_keyed_by_shown_labels():
    backend = mock(rules=RULES)
    spec = DecisionSpec("refund_request", "choice", ("REVIEW", "REFUND", "REJECT"))
    answer = asyncio.run(backend.predict(DecisionRequest("r1", spec, "damaged")))
    assert answer.probabilities == {"REVIEW": 0.03, "REFUND": 0.96, "REJECT": 0.01}
    assert asyncio.run(backend.healthcheck()).status == "ok"
    assert backend.details() == {"rules": 2, "seed": 0}


@pytest.mark.parametrize("text", [
    "", " ", "\t\n", "plain", "  two  spaces ", "tab\tand\nnewline",
    "\x1c\x1dfile separators\x1e\x1f",
    "no-break\u00a0space", "ideographic\u3000space\u2028line\u2029para\x85next", "\u200bzero width",
])
def test_rule_text_collapses_whitespace_as_the_regular_expression_does(text: str) -> None:
    assert _one_space(text) == re.sub(r"\s+", " ", text)
