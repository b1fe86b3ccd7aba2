"""normalization: strip accents and collapse whitespace (agentverity's normalisation).

Accents: NFD, then combining marks (category Mn) dropped, then NFC. Whitespace: every run
becomes one space and the ends are trimmed. Steps name the edits that change the text, in order;
plain ASCII with single spaces is left unchanged and skipped, never counted as passed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from decflow.properties.base import (
    SKIP_NO_CHANGE,
    Generated,
    Input,
    Step,
    TextNotAvailable,
    finish,
    get_text,
    with_text,
)

_RUN = re.compile(r"\s+")


def strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    stripped = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
    # Recompose what is left, so scripts NFD splits without marks (Hangul) stay unchanged.
    return unicodedata.normalize("NFC", stripped)


def collapse_whitespace(text: str) -> str:
    return _RUN.sub(" ", text).strip()


EDITS = {"strip_accents": strip_accents, "collapse_whitespace": collapse_whitespace}


def apply(text: str, steps: Sequence[Step]) -> str:
    for step in steps:
        text = EDITS[step["normalize"]](text)
    return text


def generate(config: Any, original: Input, text_field: str | None) -> Generated:
    try:
        text = get_text(original, text_field)
    except TextNotAvailable as skip:
        return Generated(skip_reason=str(skip))
    steps: list[Step] = []
    current = text
    for name, edit in EDITS.items():
        edited = edit(current)
        if edited != current:
            steps.append({"normalize": name})
            current = edited
    if not steps:
        return Generated(skip_reason=SKIP_NO_CHANGE)
    return finish(original, [(steps, with_text(original, text_field, current), None)])
