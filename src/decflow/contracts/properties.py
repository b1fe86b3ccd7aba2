"""The `properties` section: the property registry and the settings models of DecGuard's
eight metamorphic properties plus decflow's `case_swap`, `normalization` and
`counterfactual`.

A property is one `PropertyEntry`: its settings model (here, with the contract) and its
transformation (`decflow.properties`, named by module path so this layer imports none).
The section's model is built from the registry when the first contract is parsed, which
closes it (`decflow.registry`).
"""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import AfterValidator, Field, create_model, model_validator

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
from decflow.registry import Registry

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
_SLOT = re.compile(r"[a-z][a-z0-9_]*\Z")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain text, not only whitespace")
    return value


Sentence = Annotated[str, AfterValidator(_not_blank)]
Fragments = Annotated[list[Sentence], Field(min_length=1)]


class PropertyConfig(StrictModel):
    """The settings every property has; `applies_to`: the decision types it applies to."""

    applies_to: ClassVar[tuple[str, ...]] = ALL_TYPES

    enabled: bool = True
    level: Level = "requirement"


# The gates a property's checks carry (`<property>.<gate>`): the share of its transformed
# cases that errored, violated its relation, or flipped the decision.
PROPERTY_GATES = ("max_error_rate", "max_violation_rate", "max_flip_rate")


class PropertyBase(PropertyConfig):
    """A metamorphic property judged by violation and flip rates."""

    max_violation_rate: Unit = 0.0
    max_flip_rate: Unit | None = None


class LimitedProperty(PropertyBase):
    """An invariance judged per transformed case; at least one limit must be set."""

    max_tv_distance: Unit | None = None
    max_js_divergence: Unit | None = None
    max_abs_delta: Unit | None = None
    max_confidence_delta: Unit | None = None

    @model_validator(mode="after")
    def _needs_a_limit(self) -> Self:
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
    def _has_variants(self) -> Self:
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
    def _one_axis(self) -> Self:
        if set(self.a) != set(self.b):
            raise ValueError("'a' and 'b' must fill the same slots")
        if self.a == self.b:
            raise ValueError("'a' and 'b' are identical; a pair must differ on its axis")
        return self


def _template(value: str) -> str:
    if not placeholders(value):
        raise ValueError("the template needs at least one persona slot such as {full_name}")
    return value


class Counterfactual(PropertyConfig):
    """decflow: persona pairs that differ on one axis must get the same decision."""

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


@dataclass(frozen=True)
class PropertyEntry:
    """A property as the contract knows it: its key under `properties`, its settings model,
    and its transformation as `module:attribute` of a `decflow.properties.base.Transformation`
    (None for a property judged elsewhere: `counterfactual`, by the diagnostics). `core`:
    one of DecGuard's eight, hashed as null when absent; any other is a decflow extension,
    left out of the hash when absent (so a plain 0.1 contract hashes as DecGuard's)."""

    name: str
    settings: type[PropertyConfig]
    transformation: str | None
    core: bool = False


# Registration order is the run order (never the contract's order).
PROPERTIES: Registry[PropertyEntry] = Registry("property", lambda entry: entry.name)
for _entry in (
    PropertyEntry("option_order", OptionOrder, "decflow.properties.option_order:OPTION_ORDER",
                  core=True),
    PropertyEntry("label_format", LabelFormat, "decflow.properties.label_format:LABEL_FORMAT",
                  core=True),
    PropertyEntry("irrelevant_context", IrrelevantContext,
                  "decflow.properties.insertion:IRRELEVANT_CONTEXT", core=True),
    PropertyEntry("repeated_context", RepeatedContext,
                  "decflow.properties.insertion:REPEATED_CONTEXT", core=True),
    PropertyEntry("whitespace", Whitespace, "decflow.properties.whitespace:WHITESPACE",
                  core=True),
    PropertyEntry("paraphrase", Paraphrase, "decflow.properties.paraphrase:PARAPHRASE",
                  core=True),
    PropertyEntry("inversion", Inversion, "decflow.properties.inversion:INVERSION", core=True),
    PropertyEntry("monotonic", Monotonic, "decflow.properties.monotonic:MONOTONIC", core=True),
    PropertyEntry("case_swap", CaseSwap, "decflow.properties.case_swap:CASE_SWAP"),
    PropertyEntry("normalization", Normalization,
                  "decflow.properties.normalization:NORMALIZATION"),
    PropertyEntry("counterfactual", Counterfactual, None),
):
    PROPERTIES.register(_entry)


class PropertySet(StrictModel):
    """The `properties` section: an optional settings model per registered property (the
    model itself is `properties_model()`, built from the registry)."""

    def get(self, name: str) -> PropertyConfig | None:
        found: PropertyConfig | None = getattr(self, name, None)
        return found

    def enabled(self) -> list[tuple[str, PropertyConfig]]:
        """Present and enabled properties, in the fixed run order (not contract order)."""
        present = ((name, self.get(name)) for name in PROPERTIES.names())
        return [(name, cfg) for name, cfg in present if cfg is not None and cfg.enabled]


@lru_cache(maxsize=1)
def properties_model() -> type[PropertySet]:
    """The section's model: one optional field per registered property (closes the
    registry: the first contract parsed fixes the properties every later one may use)."""
    fields: dict[str, Any] = {
        entry.name: (entry.settings | None, None) for entry in PROPERTIES.entries()
    }
    return create_model("Properties", __base__=PropertySet, __module__=__name__, **fields)


def extension_properties() -> tuple[str, ...]:
    return tuple(entry.name for entry in PROPERTIES.entries() if not entry.core)


def property_model(name: str) -> type[PropertyConfig]:
    """The settings model of property `name`."""
    return PROPERTIES.get(name).settings


def applies_to(name: str) -> tuple[str, ...]:
    """The decision types property `name` applies to: its model's `applies_to`."""
    return tuple(property_model(name).applies_to)
