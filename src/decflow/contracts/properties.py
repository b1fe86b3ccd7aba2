"""The `properties` section: DecGuard's eight metamorphic properties plus decflow's
`case_swap`, `normalization` and `counterfactual`.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import AfterValidator, Field, model_validator

from decflow.contracts.base import (
    Level,
    NonEmptyStr,
    NonNegative,
    StrictModel,
    Text,
    UniqueTexts,
    Unit,
    check_unique,
    placeholders,
)
from decflow.contracts.decision import DECISION_TYPES as ALL_TYPES
from decflow.contracts.paraphrase import IdentitySource, ParaphraseSource

LabelStyle = Literal["upper", "lower", "capitalized", "lettered", "numbered", "quoted", "bracketed"]
LABEL_STYLES: tuple[LabelStyle, ...] = get_args(LabelStyle)
# Also the fallback of `properties.insertion` when a config carries no fragments.
DEFAULT_FRAGMENTS = (
    "The weather was mild that day.",
    "This note was written on a Tuesday.",
    "The office is on the third floor.",
    "The meeting room has a large window.",
    "There is a small plant on the desk.",
    "The train was on time this morning.",
    "The corridor lights were repainted last year.",
    "A colleague brought biscuits to share.",
)
PER_CASE_LIMITS = ("max_tv_distance", "max_js_divergence", "max_abs_delta", "max_confidence_delta")
Axis = Literal["gender", "ethnicity", "religion", "role"]
AXES: tuple[Axis, ...] = get_args(Axis)
_SLOT = re.compile(r"^[a-z][a-z0-9_]*$")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain text, not only whitespace")
    return value


Sentence = Annotated[str, AfterValidator(_not_blank)]
Fragments = Annotated[list[Sentence], Field(min_length=1)]


class PropertyBase(StrictModel):
    applies_to: ClassVar[tuple[str, ...]] = ALL_TYPES

    enabled: bool = True
    level: Level = "requirement"
    max_violation_rate: Unit = 0.0
    max_flip_rate: Unit | None = None


class LimitedProperty(PropertyBase):
    """An invariance judged per transformed case; at least one limit must be set."""

    max_tv_distance: Unit | None = None
    max_js_divergence: Unit | None = None
    max_abs_delta: Unit | None = None
    max_confidence_delta: Unit | None = None

    @model_validator(mode="after")
    def _needs_a_limit(self) -> LimitedProperty:
        if self.max_flip_rate is None and all(getattr(self, k) is None for k in PER_CASE_LIMITS):
            raise ValueError(f"set at least one of {', '.join(PER_CASE_LIMITS)} or max_flip_rate")
        return self


class OptionOrder(LimitedProperty):
    applies_to: ClassVar[tuple[str, ...]] = ("choice", "noul")
    samples: int = Field(default=3, ge=1, le=100)


class LabelFormat(LimitedProperty):
    styles: Annotated[list[LabelStyle], AfterValidator(check_unique)] = Field(
        default_factory=lambda: list(LABEL_STYLES)
    )
    aliases: dict[Text, Annotated[list[Text], Field(min_length=1)]] = Field(default_factory=dict)
    samples: int = Field(default=2, ge=1, le=100)

    @model_validator(mode="after")
    def _has_variants(self) -> LabelFormat:
        if not self.styles and not self.aliases:
            raise ValueError("set at least one style or alias")
        return self


class IrrelevantContext(LimitedProperty):
    fragments: Fragments = Field(default_factory=lambda: list(DEFAULT_FRAGMENTS))
    insertions: int = Field(default=1, ge=1, le=10)
    samples: int = Field(default=2, ge=1, le=100)


class RepeatedContext(LimitedProperty):
    fragments: Fragments = Field(default_factory=lambda: list(DEFAULT_FRAGMENTS))
    repeats: int = Field(default=3, ge=2, le=20)
    samples: int = Field(default=1, ge=1, le=100)


class Whitespace(LimitedProperty):
    edits: int = Field(default=3, ge=1, le=20)
    samples: int = Field(default=2, ge=1, le=100)


class Paraphrase(LimitedProperty):
    source: ParaphraseSource = Field(default_factory=IdentitySource)
    samples: int = Field(default=1, ge=1, le=20)


class Rewrite(StrictModel):
    find: NonEmptyStr
    replace: str


class Inversion(LimitedProperty):
    applies_to: ClassVar[tuple[str, ...]] = ("noul",)
    rewrites: Annotated[list[Rewrite], Field(min_length=1)]
    samples: int = Field(default=1, ge=1, le=20)


class Monotonic(PropertyBase):
    applies_to: ClassVar[tuple[str, ...]] = ("score",)
    field: NonEmptyStr
    direction: Literal["increasing", "decreasing"] = "increasing"
    deltas: Annotated[list[Annotated[float, Field(gt=0.0)]], Field(min_length=1)] = Field(
        default_factory=lambda: [1.0]
    )
    max_level_decrease: NonNegative = 0.0


class CaseSwap(LimitedProperty):
    """decflow: invert the letter case of the text; the decision must not change."""

    samples: int = Field(default=1, ge=1, le=20)


class Normalization(LimitedProperty):
    """decflow: strip accents and collapse whitespace; the decision must not change."""

    samples: int = Field(default=1, ge=1, le=20)


def _slot(name: str) -> str:
    if not _SLOT.match(name):
        raise ValueError(f"{name!r} is not a slot name (lower-case letters, digits and '_')")
    return name


Slots = Annotated[dict[Annotated[str, AfterValidator(_slot)], str], Field(min_length=1)]


class PersonaPair(StrictModel):
    axis: Axis
    a: Slots
    b: Slots

    @model_validator(mode="after")
    def _one_axis(self) -> PersonaPair:
        if set(self.a) != set(self.b):
            raise ValueError("'a' and 'b' must fill the same slots")
        if self.a == self.b:
            raise ValueError("'a' and 'b' are identical; a pair must differ on its axis")
        return self


def _template(value: str) -> str:
    if not placeholders(value):
        raise ValueError("the template needs at least one persona slot such as {full_name}")
    return value


class Counterfactual(StrictModel):
    """decflow: persona pairs that differ on one axis must get the same decision."""

    applies_to: ClassVar[tuple[str, ...]] = ALL_TYPES

    enabled: bool = True
    level: Level = "requirement"
    dimensions: Annotated[list[Axis], Field(min_length=1), AfterValidator(check_unique)] = Field(
        default_factory=lambda: list(AXES)
    )
    language: Literal["en", "de"] = "en"
    catalog_seed: int = Field(default=42, ge=0, lt=2**63)
    num_pairs_per_dimension: int = Field(default=4, ge=1, le=16)
    pool_size_per_dimension: int = Field(default=16, ge=1, le=64)
    persona_pairs: Annotated[list[PersonaPair], Field(min_length=1)] | None = None
    placebo: bool = True
    favourable_labels: Annotated[UniqueTexts, Field(min_length=1)] | None = None
    # Open interval: the excess is tested against the limit, and no finite evidence can
    # show an excess below 0 or above 1 (0 would make every axis unfair-or-undecided forever).
    max_flip_rate: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05
    max_tv_distance: Unit | None = None
    # None: the catalogue's own preamble for the language (German needs its article forms).
    template: Annotated[str, AfterValidator(_template)] | None = None


PropertyConfig = (
    OptionOrder
    | LabelFormat
    | IrrelevantContext
    | RepeatedContext
    | Whitespace
    | Paraphrase
    | Inversion
    | Monotonic
    | CaseSwap
    | Normalization
    | Counterfactual
)

CORE_PROPERTIES = (
    "option_order",
    "label_format",
    "irrelevant_context",
    "repeated_context",
    "whitespace",
    "paraphrase",
    "inversion",
    "monotonic",
)
EXTENSION_PROPERTIES = ("case_swap", "normalization", "counterfactual")
PROPERTY_ORDER = CORE_PROPERTIES + EXTENSION_PROPERTIES


class Properties(StrictModel):
    option_order: OptionOrder | None = None
    label_format: LabelFormat | None = None
    irrelevant_context: IrrelevantContext | None = None
    repeated_context: RepeatedContext | None = None
    whitespace: Whitespace | None = None
    paraphrase: Paraphrase | None = None
    inversion: Inversion | None = None
    monotonic: Monotonic | None = None
    case_swap: CaseSwap | None = None
    normalization: Normalization | None = None
    counterfactual: Counterfactual | None = None

    def enabled(self) -> list[tuple[str, PropertyConfig]]:
        """Present and enabled properties, in the fixed run order (not contract order)."""
        present = ((name, getattr(self, name)) for name in PROPERTY_ORDER)
        return [(name, cfg) for name, cfg in present if cfg is not None and cfg.enabled]


def property_model(name: str) -> type[PropertyConfig]:
    """The settings model of property `name`."""
    model: type[PropertyConfig] = get_args(Properties.model_fields[name].annotation)[0]
    return model


def applies_to(name: str) -> tuple[str, ...]:
    """The decision types property `name` applies to: its model's `applies_to`."""
    return tuple(property_model(name).applies_to)
