"""case_swap: invert the letter case of the text (agentverity's case invariance).

One transformed case per case, step `{"case": "swap"}`. Text without cased letters is left
unchanged and therefore skipped, never counted as passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from decflow.properties.base import Generated, Original, Step, TextCase, Transformation, text_edit

if TYPE_CHECKING:
    from decflow.contracts.properties import CaseSwap

STEPS: list[Step] = [{"case": "swap"}]


def apply(text: str) -> str:
    return text.swapcase()


def generate(case: TextCase) -> Generated:
    return case.finish([(list(STEPS), apply(case.text))])


def _generate(_config: CaseSwap, original: Original) -> Generated:
    return generate(original.text_case())


def _swapped(text: str, steps: Sequence[Step]) -> str:
    return apply(text) if steps else text


CASE_SWAP = Transformation(_generate, text_edit(_swapped))
