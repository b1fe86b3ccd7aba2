"""The property catalogue: run order, relations, and one entry point per operation.

`generate` derives the transformed cases of one (property, case); `apply_steps` rebuilds a
transformed case from stored steps (pure; used by minimisation and replay).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decflow.contracts.properties import PROPERTY_ORDER as CONTRACT_ORDER
from decflow.contracts.properties import applies_to
from decflow.properties import (
    case_swap,
    inversion,
    label_format,
    monotonic,
    normalization,
    option_order,
    paraphrase,
    whitespace,
)
from decflow.properties.base import (
    Generated,
    Input,
    Presentation,
    Step,
    TextCase,
    TextNotAvailable,
    get_text,
    with_text,
)
from decflow.properties.insertion import generate as generate_insertion
from decflow.properties.insertion import insert
from decflow.properties.paraphrasers import Paraphraser
from decflow.properties.stream import Stream

# The contract's run order; counterfactual is not a transformation (diagnostics runs it).
PROPERTY_ORDER = tuple(name for name in CONTRACT_ORDER if name != "counterfactual")

RELATIONS = {name: "invariant" for name in PROPERTY_ORDER} | {
    "inversion": "swapped",
    "monotonic": "monotonic",
}

DECISION_TYPES = {name: applies_to(name) for name in PROPERTY_ORDER}

# Properties whose failing cases are shrunk by greedy minimisation.
SHRINKABLE = frozenset(
    {"option_order", "label_format", "irrelevant_context", "repeated_context", "whitespace"}
)


def generate(
    property_name: str,
    config: Any,
    *,
    seed: int,
    case_id: str,
    input: Input,
    labels: Sequence[str],
    decision_type: str,
    text_field: str | None,
    paraphraser: Paraphraser | None = None,
) -> Generated:
    """Transformed cases of one case for one property (or why the case is skipped)."""
    if property_name not in RELATIONS:
        raise ValueError(f"unknown property {property_name!r}")
    if decision_type not in DECISION_TYPES[property_name]:
        raise ValueError(f"{property_name} does not apply to {decision_type} decisions")
    if property_name == "monotonic":
        return monotonic.generate(config, input)
    if property_name == "option_order":
        return option_order.generate(config, Stream(seed, property_name, case_id), input, labels)
    if property_name == "label_format":
        return label_format.generate(config, Stream(seed, property_name, case_id), input, labels)
    try:
        case = TextCase.of(input, text_field)
    except TextNotAvailable as skip:
        return Generated(skip_reason=str(skip))
    if property_name == "paraphrase":
        return paraphrase.generate(config, case, case_id=case_id, paraphraser=paraphraser)
    if property_name == "inversion":
        return inversion.generate(config, case)
    if property_name == "case_swap":
        return case_swap.generate(case)
    if property_name == "normalization":
        return normalization.generate(case)
    stream = Stream(seed, property_name, case_id)
    if property_name == "whitespace":
        return whitespace.generate(config, stream, case)
    return generate_insertion(config, stream, case, repeated=property_name == "repeated_context")


def apply_steps(
    property_name: str,
    steps: Sequence[Step],
    original_input: Input,
    labels: Sequence[str],
    text_field: str | None,
) -> tuple[Input, Presentation]:
    """The (input, presentation) that `steps` make of the original case."""
    if property_name == "option_order":
        return original_input, option_order.presentation(steps, labels)
    if property_name == "label_format":
        return original_input, label_format.presentation(steps, labels)
    if property_name == "monotonic":
        return monotonic.apply(original_input, steps), None
    text = get_text(original_input, text_field)
    if property_name in ("irrelevant_context", "repeated_context"):
        text = insert(text, steps)
    elif property_name == "whitespace":
        text = whitespace.apply(text, steps)
    elif property_name == "paraphrase":
        text = steps[-1]["text"] if steps else text
    elif property_name == "inversion":
        text = inversion.apply(text, steps)
    elif property_name == "case_swap":
        text = case_swap.apply(text) if steps else text
    elif property_name == "normalization":
        text = normalization.apply(text, steps)
    else:
        raise ValueError(f"unknown property {property_name!r}")
    return with_text(original_input, text_field, text), None


def regeneration_status(
    property_name: str,
    config: Any,
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
    if property_name == "paraphrase":
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
