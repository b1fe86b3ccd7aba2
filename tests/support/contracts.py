"""Shared helpers for the contract tests (no tests here): examples and dotted-path edits."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.support.paths import EXAMPLES

DELETE = object()


def example(name: str) -> dict[str, Any]:
    """`refund`, `severity` or `spam`: the parsed DecGuard example contract."""
    return yaml.safe_load((EXAMPLES / name / "decguard.yaml").read_text(encoding="utf-8"))


def edited(name: str, edits: dict[str, Any]) -> dict[str, Any]:
    """The example with `a.b.0.c` paths set to values (DELETE removes the key)."""
    doc = copy.deepcopy(example(name))
    for path, value in edits.items():
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        if isinstance(target, list):
            target[int(last)] = value
        elif value is DELETE:
            del target[last]
        else:
            target[last] = value
    return doc
