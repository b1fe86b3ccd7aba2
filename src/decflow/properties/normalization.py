"""normalization: strip accents and collapse whitespace (agentverity's normalisation).

Accents: NFD, then combining marks (category Mn) dropped, then NFC. Whitespace: every run
becomes one space and the ends are trimmed. Steps name the edits that change the text, in order;
plain ASCII with single spaces is left unchanged and skipped, never counted as passed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from decflow.properties.base import (
    SKIP_NO_CHANGE,
    Generated,
    Original,
    Step,
    TextCase,
    Transformation,
    text_edit,
)

if TYPE_CHECKING:
    from decflow.contracts.properties import Normalization

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


def generate(case: TextCase) -> Generated:
    steps: list[Step] = []
    current = case.text
    for name, edit in EDITS.items():
        edited = edit(current)
        if edited != current:
            steps.append({"normalize": name})
            current = edited
    if not steps:
        return Generated(skip_reason=SKIP_NO_CHANGE)
    return case.finish([(steps, current)])


def _generate(_config: Normalization, original: Original) -> Generated:
    return generate(original.text_case())


NORMALIZATION = Transformation(_generate, text_edit(apply))
