"""case_swap: invert the letter case of the text (agentverity's case invariance).

One transformed case per case, step `{"case": "swap"}`. Text without cased letters is left
unchanged and therefore skipped, never counted as passed.
"""

from __future__ import annotations

from decflow.properties.base import Generated, Step, TextCase

STEPS: list[Step] = [{"case": "swap"}]


def apply(text: str) -> str:
    return text.swapcase()


def generate(case: TextCase) -> Generated:
    return case.finish([(list(STEPS), apply(case.text))])
