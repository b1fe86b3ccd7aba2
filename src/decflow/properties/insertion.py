"""irrelevant_context and repeated_context: insert fragments at sentence boundaries.

Sentences split after `.`, `!` or `?` followed by whitespace; boundary `at` < n puts
`fragment + " "` before sentence `at`, boundary n appends `" " + fragment`. The original text
is otherwise byte-identical. Step: `{"at", "text"}`, sorted by `at` (stable).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING

from decflow.contracts.properties import DEFAULT_FRAGMENTS
from decflow.properties.base import (
    SKIP_EMPTY_TEXT,
    Generated,
    Original,
    Step,
    TextCase,
    Transformation,
    drop_one_step,
    text_edit,
)
from decflow.properties.stream import Stream

if TYPE_CHECKING:
    from decflow.contracts.properties import IrrelevantContext, RepeatedContext

# A whitespace run after sentence punctuation; the next sentence starts where it ends.
_SENTENCE_GAP = re.compile(r"[.!?]\s+")


def sentence_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _SENTENCE_GAP.finditer(text)]


_at = itemgetter("at")


def insert(text: str, steps: Sequence[Step], starts: Sequence[int] | None = None) -> str:
    """Insert the steps' fragments; `starts` = the text's sentence starts, when known."""
    if starts is None:
        starts = sentence_starts(text)
    pieces: list[str] = []
    previous = 0
    tail: list[str] = []
    for step in sorted(steps, key=_at):
        at = int(step["at"])
        if at >= len(starts):
            tail.append(" " + step["text"])
            continue
        pieces.append(text[previous : starts[at]])
        pieces.append(step["text"] + " ")
        previous = starts[at]
    pieces.append(text[previous:])
    return "".join(pieces + tail)


def generate(
    fragments: Sequence[str] | None,
    samples: int,
    stream: Stream,
    case: TextCase,
    *,
    insertions: int = 1,
    repeats: int | None = None,
) -> Generated:
    """`samples` draws of `insertions` fragments each, or of one fragment `repeats` times."""
    text = case.text
    if not text:
        return Generated(skip_reason=SKIP_EMPTY_TEXT)
    fragments = fragments or DEFAULT_FRAGMENTS
    starts = sentence_starts(text)
    boundaries = len(starts) + 1
    candidates = []
    draw_each = stream.draw_each
    picks = [len(fragments)] * (1 if repeats is not None else insertions)
    placed = [boundaries] * (repeats if repeats is not None else insertions)
    for _ in range(samples):
        chosen = [fragments[i] for i in draw_each(picks)]
        if repeats is not None:
            chosen *= repeats
        steps = [
            {"at": at, "text": fragment}
            for at, fragment in zip(draw_each(placed), chosen, strict=True)
        ]
        steps.sort(key=_at)
        candidates.append((steps, insert(text, steps, starts)))
    return case.finish(candidates)


def _irrelevant(config: IrrelevantContext, original: Original) -> Generated:
    return generate(config.fragments, config.samples, original.stream(), original.text_case(),
                    insertions=config.insertions)


def _repeated(config: RepeatedContext, original: Original) -> Generated:
    return generate(config.fragments, config.samples, original.stream(), original.text_case(),
                    repeats=config.repeats)


def _insert(text: str, steps: Sequence[Step]) -> str:
    return insert(text, steps)


IRRELEVANT_CONTEXT = Transformation(_irrelevant, text_edit(_insert), shrink=drop_one_step)
REPEATED_CONTEXT = Transformation(_repeated, text_edit(_insert), shrink=drop_one_step)
