"""The `decision` section: one model per decision type, dispatched on `type`."""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from decflow.contracts.base import Name, StrictModel, Text, UniqueTexts, check_unique

DECISION_TYPES = ("choice", "noul", "score")


def _levels_as_strings(value: Any) -> Any:
    # Score levels are often written as numbers (`levels: [1, 2, 3]`); they are labels.
    if not isinstance(value, list):
        return value
    return [str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in value]


def _list_as_tuple(value: Any) -> Any:
    # Strict tuples only accept tuples; YAML and JSON give lists.
    return tuple(value) if isinstance(value, list) else value


def _two_labels(value: tuple[str, ...]) -> tuple[str, ...]:
    if len(value) != 2:
        raise ValueError(f"a noul decision has exactly 2 labels (positive first), got {len(value)}")
    return value


class _DecisionBase(StrictModel):
    name: Name
    description: str | None = None


class ChoiceDecision(_DecisionBase):
    type: Literal["choice"]
    options: Annotated[UniqueTexts, Field(min_length=2)]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.options)


class NoulDecision(_DecisionBase):
    type: Literal["noul"]
    labels: Annotated[
        tuple[Text, ...],
        BeforeValidator(_list_as_tuple),
        AfterValidator(check_unique),
        AfterValidator(_two_labels),
    ] = ("yes", "no")


class ScoreDecision(_DecisionBase):
    type: Literal["score"]
    levels: Annotated[UniqueTexts, Field(min_length=2), BeforeValidator(_levels_as_strings)]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.levels)


Decision = ChoiceDecision | NoulDecision | ScoreDecision

DECISION_MODELS: dict[str, type[ChoiceDecision | NoulDecision | ScoreDecision]] = {
    "choice": ChoiceDecision,
    "noul": NoulDecision,
    "score": ScoreDecision,
}

# Which list key belongs to which type, so a misplaced one gets a helpful message.
LABEL_KEYS = {"options": "choice", "labels": "noul", "levels": "score"}
