"""Shared pieces of the contract models: the strict base model and constrained types.

Every model is strict (no coercion: booleans and strings are never numbers, floats are never
integers), forbids unknown keys and rejects NaN/infinity, so a typo or a quoted number can
never silently disable a gate.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from decflow.untrusted import quote

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"[a-z][a-z0-9_]*\Z")

Level = Literal["requirement", "warning"]
_Strings = TypeVar("_Strings", bound=Sequence[str])
_Model = TypeVar("_Model", bound=type[BaseModel])


class StrictModel(BaseModel):
    # defer_build: a model's validator is built when it first validates, not on import. A
    # contract validates a dozen of the ~55 models (its decision type, its providers, the
    # sections it has); the rest (other decision types and providers, absent optional
    # sections, the registries' base classes) cost a run nothing.
    model_config = ConfigDict(
        strict=True, extra="forbid", allow_inf_nan=False, frozen=True, defer_build=True
    )


def built(model: _Model) -> _Model:
    """`model` with its validator built now rather than at its first validation: for a model
    always used and nested in others (a section's gate levels), so that their schemas reuse
    its own instead of generating it again."""
    model.model_rebuild()
    return model


def empty_list() -> list[Any]:
    """A new empty list: the `default_factory` of the models' list fields. pydantic reads a
    factory's signature when it builds a model; `list`'s is a builtin's text signature,
    tokenized (~0.15 ms a field, ~2.5 ms the first time: the tokenizer's patterns)."""
    return []


def check_name(value: str) -> str:
    if not NAME_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a valid name (start with a letter or digit; use only letters, "
            "digits, '_', '.' and '-')"
        )
    return value


def check_env_name(value: str) -> str:
    if not ENV_NAME_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not an environment variable name (letters, digits and '_', "
            "not starting with a digit); contracts hold variable names, never secret values"
        )
    return value


def check_file_path(value: str) -> str:
    """A path a contract names: non-empty, without NUL bytes or line breaks (no file name
    holds a NUL; a line break would show as two lines in every message naming it)."""
    if not value:
        raise ValueError("must not be empty")
    if any(char in value for char in "\0\r\n"):
        raise ValueError(f"{quote(value)} holds a NUL byte or a line break; a path has none")
    return value


def check_text(value: str) -> str:
    """A non-empty string without surrounding whitespace (labels, keys, aliases)."""
    if not value:
        raise ValueError("must not be empty")
    if value != value.strip():
        raise ValueError(f"{value!r} has surrounding spaces")
    return value


def check_unique(values: _Strings) -> _Strings:
    duplicates = sorted(v for v, n in Counter(values).items() if n > 1)
    if duplicates:
        raise ValueError(f"entries must be unique; duplicated: {duplicates}")
    return values


Name = Annotated[str, AfterValidator(check_name)]
EnvName = Annotated[str, AfterValidator(check_env_name)]
Text = Annotated[str, AfterValidator(check_text)]
FilePath = Annotated[str, AfterValidator(check_file_path)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
UniqueTexts = Annotated[list[Text], AfterValidator(check_unique)]

Unit = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
UpToTwo = Annotated[float, Field(ge=0.0, le=2.0)]


def placeholders(template: str) -> list[str]:
    """Named `{slot}` placeholders of a template; rejects positional or computed fields."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(
            f"invalid template ({exc}); write literal braces as {{{{ and }}}}"
        ) from None
    names = []
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not _PLACEHOLDER.match(field) or spec or conversion:
            raise ValueError(f"invalid placeholder {{{field}}}: use plain {{name}} placeholders")
        names.append(field)
    return names
