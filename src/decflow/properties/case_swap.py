"""case_swap: invert the letter case of the text (agentverity's case invariance).

One transformed case per case, step `{"case": "swap"}`. Text without cased letters is left
unchanged and therefore skipped, never counted as passed.
"""

from __future__ import annotations

from typing import Any

from decflow.properties.base import (
    Generated,
    Input,
    Step,
    TextNotAvailable,
    finish,
    get_text,
    with_text,
)

STEPS: list[Step] = [{"case": "swap"}]


def apply(text: str) -> str:
    return text.swapcase()


def generate(config: Any, original: Input, text_field: str | None) -> Generated:
    try:
        text = get_text(original, text_field)
    except TextNotAvailable as skip:
        return Generated(skip_reason=str(skip))
    return finish(original, [(list(STEPS), with_text(original, text_field, apply(text)), None)])
