"""inversion (noul): negate the text with a literal rewrite; the answer must swap.

The rewrites whose `find` occurs in the text are used in contract order, the first
`samples` of them; each replaces the first occurrence. Step: `{"find", "replace"}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from decflow.properties.base import (
    SKIP_NO_REWRITE,
    Generated,
    Original,
    Step,
    TextCase,
    Transformation,
    setting,
    text_edit,
)

if TYPE_CHECKING:
    from decflow.contracts.properties import Inversion

def apply(text: str, steps: Sequence[Step]) -> str:
    for step in steps:
        text = text.replace(step["find"], step["replace"], 1)
    return text


def generate(config: Inversion, case: TextCase) -> Generated:
    text = case.text
    matching = [
        {"find": setting(r, "find"), "replace": setting(r, "replace")}
        for r in config.rewrites
        if setting(r, "find") in text
    ][: config.samples]
    if not matching:
        return Generated(skip_reason=SKIP_NO_REWRITE)
    return case.finish([([step], apply(text, [step])) for step in matching])


def _generate(config: Inversion, original: Original) -> Generated:
    return generate(config, original.text_case())


INVERSION = Transformation(_generate, text_edit(apply), relation="swapped")
