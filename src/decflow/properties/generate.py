"""The property catalogue's entry points, one per operation, each through the property's
registered `Transformation` (named by its entry in `contracts.properties.PROPERTIES`).

`generate` derives the transformed cases of one (property, case); `apply_steps` rebuilds a
transformed case from stored steps (pure; used by minimisation and replay).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from decflow.contracts.properties import PROPERTIES, PropertyConfig, applies_to
from decflow.errors import DecflowError
from decflow.properties.base import (
    Generated,
    Input,
    Original,
    ParaphraseProvider,
    Presentation,
    Relation,
    Step,
    TextNotAvailable,
    Transformation,
)


@cache
def transformation(property_name: str) -> Transformation[Any]:
    """The registered transformation of `property_name` (imported on first use)."""
    entry = PROPERTIES.get(property_name)
    if entry.transformation is None:
        raise ValueError(f"property {property_name!r} transforms no case")
    module, _, attribute = entry.transformation.partition(":")
    found = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(found, Transformation):
        raise DecflowError(
            f"property '{property_name}': {entry.transformation} is not a Transformation"
        )
    return found


def transformed_properties() -> tuple[str, ...]:
    """The properties that transform cases, in run order (`counterfactual` is judged by
    the diagnostics instead)."""
    return tuple(e.name for e in PROPERTIES.entries() if e.transformation is not None)


def relation_of(property_name: str) -> Relation:
    return transformation(property_name).relation


def generator(
    property_name: str,
    config: PropertyConfig,
    *,
    seed: int,
    labels: Sequence[str],
    decision_type: str,
    text_field: str | None,
    paraphraser: ParaphraseProvider | None = None,
) -> Callable[[str, Input], Generated]:
    """`generate` of one property for many cases: `(case_id, input) -> Generated`, with
    what every case shares (the transformation, its checks, the labels) resolved once."""
    found = transformation(property_name).generate
    if decision_type not in applies_to(property_name):
        raise ValueError(f"{property_name} does not apply to {decision_type} decisions")
    label_tuple = tuple(labels)

    def generate_case(case_id: str, input: Input) -> Generated:
        original = Original(property_name, case_id, input, label_tuple, text_field, seed,
                            paraphraser)
        try:
            return found(config, original)
        except TextNotAvailable as skip:
            return Generated(skip_reason=str(skip))

    return generate_case


def generate(
    property_name: str,
    config: PropertyConfig,
    *,
    seed: int,
    case_id: str,
    input: Input,
    labels: Sequence[str],
    decision_type: str,
    text_field: str | None,
    paraphraser: ParaphraseProvider | None = None,
) -> Generated:
    """Transformed cases of one case for one property (or why the case is skipped)."""
    return generator(
        property_name, config, seed=seed, labels=labels, decision_type=decision_type,
        text_field=text_field, paraphraser=paraphraser,
    )(case_id, input)


def apply_steps(
    property_name: str,
    steps: Sequence[Step],
    original_input: Input,
    labels: Sequence[str],
    text_field: str | None,
) -> tuple[Input, Presentation]:
    """The (input, presentation) that `steps` make of the original case."""
    original = Original(property_name, "", original_input, tuple(labels), text_field)
    return transformation(property_name).apply(steps, original)


def regeneration_status(
    property_name: str,
    config: PropertyConfig,
    *,
    sample: int,
    steps: Sequence[Step],
    transformed_input: Input,
    presentation: Presentation,
    **case: Any,
) -> str:
    """Replay's check that the stored sample regenerates identically from the seed.

    `case` is what `generate` takes for the original case (seed, case_id, input, labels,
    decision_type, text_field). `yes` or `NO`; paraphrases are never regenerated (the stored
    text is re-sent).
    """
    if not transformation(property_name).regenerates:
        return "n/a (stored text used)"
    again = generate(property_name, config, **case)
    match = next((t for t in again.transformed if t.sample == sample), None)
    stored_presentation = None if presentation is None else [tuple(p) for p in presentation]
    same = (
        match is not None
        and match.steps == list(steps)
        and match.input == transformed_input
        and match.presentation == stored_presentation
    )
    return "yes" if same else "NO"
