"""monotonic (score): add each delta to a numeric field of object inputs.

Step: `{"field", "delta"}` (delta stored as a float). The value stays an int when it and
the delta are both integral.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from decflow.properties.base import (
    Generated,
    Input,
    Original,
    Presentation,
    Step,
    Transformation,
    finish,
    skip_not_finite,
    skip_not_number,
)

if TYPE_CHECKING:
    from decflow.contracts.properties import Monotonic

def _shifted(value: int | float, delta: float) -> int | float:
    if isinstance(value, int) and float(delta).is_integer():
        return value + int(delta)
    return value + delta


def apply(original: Input, steps: Sequence[Step]) -> Input:
    if isinstance(original, str):
        return original
    shifted = dict(original)
    for step in steps:
        shifted[step["field"]] = _shifted(shifted[step["field"]], step["delta"])
    return shifted


def generate(config: Monotonic, original: Input) -> Generated:
    name = config.field
    value = original.get(name) if isinstance(original, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return Generated(skip_reason=skip_not_number(name))
    if not math.isfinite(value):
        return Generated(skip_reason=skip_not_finite(name))
    candidates = []
    for delta in config.deltas:
        steps: list[Step] = [{"field": name, "delta": float(delta)}]
        candidates.append((steps, apply(original, steps), None))
    return finish(original, candidates)


def _generate(config: Monotonic, original: Original) -> Generated:
    return generate(config, original.input)


def _apply(steps: Sequence[Step], original: Original) -> tuple[Input, Presentation]:
    return apply(original.input, steps), None


MONOTONIC = Transformation(_generate, _apply, relation="monotonic")
