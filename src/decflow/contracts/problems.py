"""Turn pydantic validation errors into `field.path: message` lines a user can act on."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from decflow.untrusted import quote

UNKNOWN_FIELD = "unknown field (check the spelling)"
_BARE_EXPONENT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")  # YAML 1.1 reads `1e-3` as a string

_EXPECTED = {
    "float_type": "a number",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "union_tag_not_found": "a mapping with a 'provider'",
}
_YAML_BOOL = "a boolean (YAML reads unquoted yes/no/on/off/true/false as booleans; quote it)"
_BOUNDS = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
}


def describe(value: Any) -> str:
    """How a YAML/JSON value reads to the user (`true`, not `True`); untrusted text is
    escaped and long values are cut (`a 400-digit integer`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int) and abs(value) >= 10**80:
        return quote(value)
    if isinstance(value, int | float):
        return f"the number {quote(value)}"
    if isinstance(value, str):
        return f"the string {quote(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def key_problem(key: Any) -> str:
    if isinstance(key, bool):
        return f"keys must be strings, got {_YAML_BOOL}"
    return f"keys must be strings, got {describe(key)} (quote it)"


def join_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    # Tags of discriminated unions start with "~"; they are not part of the user's document.
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith("~"))]
    if parts and parts[-1] == "[key]":
        parts.pop()
    return ".".join(p for p in [prefix, *parts] if p)


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "string_type" and error["loc"] and error["loc"][-1] == "[key]":
        return key_problem(value)
    if kind == "string_type" and isinstance(value, bool):
        return f"expected a string, got {_YAML_BOOL}"
    if kind == "extra_forbidden":
        return UNKNOWN_FIELD
    if kind == "missing":
        return "required field is missing"
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        return f"must be a finite number, got {describe(value)} (too large for a float)"
    if kind in _EXPECTED:
        hint = ""
        if kind in ("float_type", "int_type") and _numeric(value):
            hint = (
                " (YAML reads an exponent without a decimal point as text: write 1.0e-3)"
                if _BARE_EXPONENT.fullmatch(value)
                else " (remove the quotes)"
            )
        return f"expected {_EXPECTED[kind]}, got {describe(value)}{hint}"
    if kind in _BOUNDS:
        return f"{_BOUNDS[kind].format(**ctx)}, got {quote(value)}"
    if kind == "finite_number":
        return f"must be a finite number, got {quote(value)}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {describe(value)}"
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = ctx.get("min_length", ctx.get("max_length"))
        return f"needs {bound} {limit} item(s), got {ctx.get('actual_length')}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind in ("value_error", "assertion_error"):
        return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return str(error["msg"])


def _numeric(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def problems_from(error: ValidationError, prefix: str) -> list[str]:
    lines = []
    for detail in error.errors(include_url=False):
        path = join_path(prefix, detail["loc"])
        lines.append(f"{path}: {_message(detail)}" if path else _message(detail))
    return lines


def plain_json_problems(value: Any, path: str = "") -> list[str]:
    """Contracts are plain JSON data: string keys, finite numbers, no YAML-only types
    (binary, sets). Settings kept as written go into the canonical JSON unchanged."""
    if isinstance(value, dict):
        problems = []
        for key, item in value.items():
            at = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                problems += plain_json_problems(item, at)
            else:
                problems.append(f"{at}: {key_problem(key)}")
        return problems
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in plain_json_problems(item, f"{path}.{i}")]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{path}: must be a finite number, got {quote(value)}"]
    if value is None or isinstance(value, str | int | float):
        return []
    return [f"{path}: {type(value).__name__} values are not allowed (use plain JSON data)"]
