"""Transformations regenerated from the seed equal DecGuard 0.1.1's stored ones exactly."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from decflow.properties.generate import apply_steps, generate, regeneration_status
from tests.support.properties import (
    RUN_CONTRACTS,
    cases,
    configs,
    decision_type,
    fuzz,
    labels,
    transformations,
)


def _presentation(value: Any) -> list[tuple[str, str]] | None:
    return None if value is None else [tuple(pair) for pair in value]


def _stored_by_property(run: str) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    found: dict[str, dict[tuple[str, int], dict[str, Any]]] = defaultdict(dict)
    for row in transformations():
        if row["run"] == run:
            found[row["property"]][(row["case_id"], row["sample"])] = row
    return found


def _seed_of(run: str) -> int:
    return {row["seed"] for row in transformations() if row["run"] == run}.pop()


@pytest.mark.parametrize("run", sorted(RUN_CONTRACTS))
def test_every_stored_transformation_is_regenerated(run: str) -> None:
    example, _backend = RUN_CONTRACTS[run]
    stored = _stored_by_property(run)
    assert set(stored) == set(configs(example))
    for name, config in configs(example).items():
        produced: dict[tuple[str, int], Any] = {}
        for case_id, value in cases(example):
            generated = generate(
                name,
                config,
                seed=_seed_of(run),
                case_id=case_id,
                input=value,
                labels=labels(example),
                decision_type=decision_type(example),
                text_field=fuzz(example)["text_field"],
            )
            assert generated.skip_reason is None, (name, case_id)
            for item in generated.transformed:
                produced[(case_id, item.sample)] = item
        assert set(produced) == set(stored[name]), (run, name)
        for key, item in produced.items():
            row = stored[name][key]
            assert item.steps == row["steps"], (run, row["id"])
            assert item.input == row["input"], (run, row["id"])
            assert item.presentation == _presentation(row["presentation"]), (run, row["id"])


def test_apply_steps_rebuilds_stored_cases_and_reduced_steps() -> None:
    originals = {}
    for example in ("refund", "severity", "spam"):
        originals.update({(example, cid): value for cid, value in cases(example)})
    for row in transformations():
        example, _backend = RUN_CONTRACTS[row["run"]]
        args = (originals[(example, row["case_id"])], labels(example), fuzz(example)["text_field"])
        new_input, presentation = apply_steps(row["property"], row["steps"], *args)
        assert new_input == row["input"]
        assert presentation == _presentation(row["presentation"])


def test_the_severity_run_labelled_seed0_is_seed_7() -> None:
    # The run name says seed0, but the records carry the contract's fuzz.seed: 7.
    assert fuzz("severity")["seed"] == 7
    assert _seed_of("severity-seed0") == 7
    config = configs("severity")["whitespace"]
    first = cases("severity")[0]
    stored = [r["steps"] for r in transformations() if r["id"] == "whitespace/s1/0"]
    common = dict(input=first[1], labels=labels("severity"), decision_type="score")
    at7 = generate("whitespace", config, seed=7, case_id=first[0], text_field="text", **common)
    at0 = generate("whitespace", config, seed=0, case_id=first[0], text_field="text", **common)
    assert at7.transformed[0].steps == stored[0]
    assert at0.transformed[0].steps != stored[0]


def test_replay_regeneration_status() -> None:
    row = next(r for r in transformations() if r["id"] == "whitespace/r3/1")
    config = configs("refund")["whitespace"]
    common = dict(
        seed=42,
        case_id="r3",
        input=dict(cases("refund"))["r3"],
        labels=labels("refund"),
        decision_type="choice",
        text_field=None,
        sample=1,
        steps=row["steps"],
        presentation=row["presentation"],
    )
    assert (
        regeneration_status("whitespace", config, transformed_input=row["input"], **common) == "yes"
    )
    assert regeneration_status("whitespace", config, transformed_input="edited", **common) == "NO"
    assert (
        regeneration_status(
            "whitespace", config, transformed_input=row["input"], **{**common, "seed": 1}
        )
        == "NO"
    )
    para = configs("refund")["paraphrase"]
    assert (
        regeneration_status("paraphrase", para, transformed_input="x", **common)
        == "n/a (stored text used)"
    )
