"""Transformation families beyond the reference vectors: skips, no-ops, edge cases."""

from __future__ import annotations

import math
from typing import Any

import pytest

from decflow.properties.base import (
    SKIP_EMPTY_TEXT,
    SKIP_NO_CHANGE,
    SKIP_NO_REWRITE,
    SKIP_NO_TEXT,
)
from decflow.properties.generate import apply_steps, generate
from decflow.properties.stream import Stream
from tests.support.properties import property_config

CHOICE = ["refund", "reject", "review"]


def _generate(
    name: str,
    value: Any,
    *,
    labels: list[str] | None = None,
    text_field: str | None = None,
    decision_type: str = "choice",
    **settings: Any,
):
    return generate(
        name,
        property_config(name, **settings),
        seed=3,
        case_id="c1",
        input=value,
        labels=labels or CHOICE,
        decision_type=decision_type,
        text_field=text_field,
    )


# -- case_swap and normalization: unchanged cases are skipped, never passed --------------


def test_case_swap_inverts_letter_case() -> None:
    found = _generate("case_swap", "Refund my Order")
    assert found.skip_reason is None
    (only,) = found.transformed
    assert only.input == "rEFUND MY oRDER"
    assert only.presentation is None and not only.rerun_evidence
    assert apply_steps("case_swap", only.steps, "Refund my Order", CHOICE, None) == (
        only.input,
        None,
    )


@pytest.mark.parametrize("text", ["", "1234 !?", "١٢٣ 漢字"])
def test_case_swap_skips_text_without_cased_letters(text: str) -> None:
    found = _generate("case_swap", text)
    assert found.transformed == []
    assert found.skip_reason == SKIP_NO_CHANGE == "no transformation changes this case"


def test_normalization_strips_accents_and_collapses_whitespace() -> None:
    found = _generate(
        "normalization", {"text": "  Café\t crème  brûlée ", "n": 1}, text_field="text"
    )
    (only,) = found.transformed
    assert only.input == {"text": "Cafe creme brulee", "n": 1}
    assert only.steps == [{"normalize": "strip_accents"}, {"normalize": "collapse_whitespace"}]
    accents_only = _generate("normalization", "naïve résumé")
    assert accents_only.transformed[0].steps == [{"normalize": "strip_accents"}]
    assert accents_only.transformed[0].input == "naive resume"


@pytest.mark.parametrize("text", ["plain ascii with single spaces", "", "한국어 텍스트"])
def test_normalization_skips_text_it_leaves_unchanged(text: str) -> None:
    found = _generate("normalization", text)
    assert found.transformed == []
    assert found.skip_reason == SKIP_NO_CHANGE


def test_text_properties_need_text() -> None:
    assert _generate("case_swap", {"text": "x"}).skip_reason == SKIP_NO_TEXT
    missing = _generate("normalization", {"body": "x"}, text_field="text")
    assert missing.skip_reason == "input field 'text' is missing or not a string"
    not_string = _generate("whitespace", {"text": 3}, text_field="text")
    assert not_string.skip_reason == "input field 'text' is missing or not a string"
    assert _generate("irrelevant_context", "").skip_reason == SKIP_EMPTY_TEXT == "text is empty"
    assert (
        _generate("repeated_context", {"text": ""}, text_field="text").skip_reason
        == SKIP_EMPTY_TEXT
    )


def test_label_properties_work_on_object_inputs_without_text() -> None:
    found = _generate("option_order", {"amount": 3})
    assert len(found.transformed) == 3
    assert all(t.input == {"amount": 3} for t in found.transformed)


# -- option_order -----------------------------------------------------------------------


def test_option_order_noul_has_exactly_one_order() -> None:
    found = _generate("option_order", "x", labels=["yes", "no"], decision_type="noul", samples=3)
    assert [t.steps for t in found.transformed] == [[{"order": [1, 0]}]]
    assert found.transformed[0].presentation == [("no", "no"), ("yes", "yes")]


def test_option_order_with_many_labels_draws_distinct_shuffles() -> None:
    labels = [f"l{i}" for i in range(8)]
    found = _generate("option_order", "x", labels=labels, samples=20)
    orders = [tuple(t.steps[0]["order"]) for t in found.transformed]
    assert len(orders) == 20 == len(set(orders))
    assert tuple(range(8)) not in orders
    assert all(sorted(order) == list(range(8)) for order in orders)
    again = _generate("option_order", "x", labels=labels, samples=20)
    assert [t.steps for t in again.transformed] == [t.steps for t in found.transformed]


# -- label_format -----------------------------------------------------------------------


def test_label_format_drops_styles_that_change_nothing_and_colliding_aliases() -> None:
    found = _generate(
        "label_format",
        "x",
        labels=["yes", "no"],
        decision_type="noul",
        styles=["lower", "upper"],
        aliases={"yes": ["true", "no"], "no": ["false"]},
        samples=10,
    )
    variants = [t.presentation for t in found.transformed]
    # `lower` changes nothing; alias index 1 would show "no" twice.
    assert sorted(variants) == sorted(
        [[("YES", "yes"), ("NO", "no")], [("true", "yes"), ("false", "no")]]
    )
    alias = next(t for t in found.transformed if t.steps[0].get("alias"))
    assert alias.steps == [{"label": "yes", "alias": "true"}, {"label": "no", "alias": "false"}]


def test_label_format_only_steps_labels_whose_form_changes() -> None:
    found = _generate(
        "label_format", "x", labels=["OK", "retry"], decision_type="noul", styles=["upper"]
    )
    assert found.transformed[0].steps == [{"label": "retry", "style": "upper"}]
    assert found.transformed[0].presentation == [("OK", "OK"), ("RETRY", "retry")]


def test_lettered_labels_past_z_use_numbers() -> None:
    labels = [f"l{i}" for i in range(28)]
    found = _generate("label_format", "x", labels=labels, styles=["lettered"], samples=1)
    shown = [s for s, _ in found.transformed[0].presentation]
    assert shown[0] == "A) l0" and shown[25] == "Z) l25" and shown[26] == "27) l26"


def test_label_format_with_nothing_to_change_is_skipped() -> None:
    found = _generate(
        "label_format", "x", labels=["1", "2"], decision_type="score", styles=["upper", "lower"]
    )
    assert found.skip_reason == SKIP_NO_CHANGE


# -- inversion and monotonic ----------------------------------------------------------------


def test_inversion_uses_matching_rewrites_in_order_first_occurrence_only() -> None:
    rewrites = [
        {"find": " is absent", "replace": " is present"},
        {"find": " is eligible", "replace": " is not eligible"},
        {"find": "he", "replace": "she"},
    ]
    text = "He is eligible; he is eligible."
    found = _generate(
        "inversion", text, labels=["yes", "no"], decision_type="noul", rewrites=rewrites, samples=2
    )
    assert [t.input for t in found.transformed] == [
        "He is not eligible; he is eligible.",
        "He is eligible; she is eligible.",
    ]
    assert found.transformed[0].steps == [{"find": " is eligible", "replace": " is not eligible"}]
    none = _generate(
        "inversion", "nothing", labels=["yes", "no"], decision_type="noul", rewrites=rewrites
    )
    assert none.skip_reason == SKIP_NO_REWRITE == "no rewrite matches the text"


def test_monotonic_keeps_integers_integral() -> None:
    def shifted(value: Any, deltas: list[float]) -> list[Any]:
        found = _generate(
            "monotonic",
            {"n": value},
            labels=["1", "2"],
            decision_type="score",
            field="n",
            deltas=deltas,
        )
        return [t.input["n"] for t in found.transformed]

    assert shifted(3, [2.0, 0.5]) == [5, 3.5]
    assert isinstance(shifted(3, [2.0])[0], int)
    assert shifted(1.5, [1.0]) == [2.5]
    assert shifted(2**60, [1.0]) == [2**60 + 1]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"x": 1}, "input field 'n' is missing or not a number"),
        ({"n": True}, "input field 'n' is missing or not a number"),
        ({"n": "3"}, "input field 'n' is missing or not a number"),
        ("text", "input field 'n' is missing or not a number"),
        ({"n": math.inf}, "input field 'n' is not finite"),
        ({"n": math.nan}, "input field 'n' is not finite"),
    ],
)
def test_monotonic_skip_reasons(value: Any, reason: str) -> None:
    found = _generate("monotonic", value, labels=["1", "2"], decision_type="score", field="n")
    assert found.skip_reason == reason


def test_wrong_decision_type_is_refused() -> None:
    with pytest.raises(ValueError):
        _generate("monotonic", {"n": 1}, field="n")


# -- insertion and whitespace ---------------------------------------------------------------


def test_insertion_keeps_the_original_text_byte_identical() -> None:
    text = "First one.  Second one!\nThird one?"
    found = _generate("irrelevant_context", text, insertions=4, samples=5, fragments=["F."])
    assert found.transformed
    for item in found.transformed:
        assert item.input.count("F.") == len(item.steps) == 4
        assert item.input.replace("F. ", "").replace(" F.", "") == text
    before_second = apply_steps("irrelevant_context", [{"at": 1, "text": "X."}], text, CHOICE, None)
    assert before_second[0] == "First one.  X. Second one!\nThird one?"
    at_end = apply_steps("irrelevant_context", [{"at": 3, "text": "X."}], text, CHOICE, None)
    assert at_end[0] == text + " X."


def test_whitespace_steps_and_apply_agree() -> None:
    text = "a  b\tc"
    found = _generate("whitespace", text, edits=4, samples=6)
    for item in found.transformed:
        assert apply_steps("whitespace", item.steps, text, CHOICE, None) == (item.input, None)
        runs = [s for s in item.steps if isinstance(s["at"], int)]
        assert all(s["ws"] != ("  " if s["at"] == 0 else "\t") for s in runs)
    inputs = [t.input for t in found.transformed]
    assert len(inputs) == len(set(inputs))  # duplicates dropped


# -- the stream --------------------------------------------------------------------------


def test_stream_sample_is_a_partial_fisher_yates_without_side_effects() -> None:
    items = list(range(10))
    stream = Stream(0, "option_order", "c1")
    picked = stream.sample(items, 4)
    assert items == list(range(10))
    assert len(set(picked)) == 4
    replay = Stream(0, "option_order", "c1")
    pool = list(range(10))
    for i in range(4):
        j = i + replay.draw(10 - i)
        pool[i], pool[j] = pool[j], pool[i]
    assert picked == pool[:4]
    assert all(0 <= Stream(1, "p", "c").draw(7) < 7 for _ in range(5))
