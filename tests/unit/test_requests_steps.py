"""The requests table's `steps_json` is each transformed case's steps encoded as JSON,
whichever way the requests stage builds it (shared step dicts are encoded once and joined)."""

from __future__ import annotations

import json

import pytest

from decflow.contracts.properties import IrrelevantContext, RepeatedContext, Whitespace
from decflow.pipeline.contract_run.derive import _RequestRows
from decflow.properties.generate import generator

LABELS = ("refund", "reject", "review")
TEXTS = [
    'She said "refund it" \\ twice.  Then left!\tOK?',
    "Çà et là: l'été — 🙂 fini.\nNext line.",
    "one",
    "  leading and trailing  ",
]
FRAGMENTS = ['A "quoted" note.', "Back\\slash and tab\there.", "Ünïcödé 🙂 text."]
CONFIGS = {
    "whitespace": Whitespace(edits=4, samples=3, max_tv_distance=0.1),
    "irrelevant_context": IrrelevantContext(fragments=FRAGMENTS, insertions=3, samples=3,
                                            max_tv_distance=0.1),
    "repeated_context": RepeatedContext(fragments=FRAGMENTS, repeats=2, samples=2,
                                        max_tv_distance=0.1),
}


@pytest.mark.parametrize("prop", sorted(CONFIGS))
def test_steps_json_is_the_json_of_the_generated_steps(prop: str) -> None:
    generate = generator(prop, CONFIGS[prop], seed=7, labels=LABELS, decision_type="choice",
                         text_field=None)
    rows = _RequestRows(prop, LABELS)
    expected: list[tuple[str, int, str, str]] = []
    for round_ in range(3):  # cases repeat texts, so step dicts are shared between them
        for i, text in enumerate(TEXTS):
            case_id = f"c{round_}-{i}"
            items = generate(case_id, text).transformed
            rows.add(case_id, items)
            expected += [(case_id, t.sample, json.dumps(t.steps, ensure_ascii=False), t.input)
                         for t in items]
    frame = rows.frame()
    assert frame.height == len(expected) > 0
    assert list(frame.select("case_id", "sample", "steps_json", "input_text").iter_rows()) == (
        expected
    )
