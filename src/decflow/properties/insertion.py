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
    shared_step_list,
    text_edit,
)
from decflow.properties.stream import Stream

if TYPE_CHECKING:
    from decflow.contracts.properties import IrrelevantContext, RepeatedContext

# A whitespace run after sentence punctuation; the next sentence starts where it ends.
_SENTENCE_GAP = re.compile(r"[.!?]\s+")


def sentence_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _SENTENCE_GAP.finditer(text)]


_first = itemgetter(0)
# Sentence starts of recent texts: datasets repeat texts, and two properties scan each.
_STARTS: dict[str, list[int]] = {}
_STARTS_KEPT = 4096


def _starts_of(text: str) -> list[int]:
    found = _STARTS.get(text)
    if found is None:
        if len(_STARTS) >= _STARTS_KEPT:
            _STARTS.clear()
        found = _STARTS[text] = sentence_starts(text)
    return found


def insert(text: str, steps: Sequence[Step]) -> str:
    """Insert the steps' fragments."""
    placed = sorted(((int(step["at"]), step["text"]) for step in steps), key=_first)
    return _inserted(text, placed, sentence_starts(text))


def _inserted(text: str, placed: Sequence[tuple[int, str]], starts: Sequence[int]) -> str:
    """`text` with each (boundary, fragment) of `placed` (sorted by boundary) inserted;
    `starts` = the text's sentence starts."""
    pieces: list[str] = []
    previous = 0
    tail: list[str] = []
    for at, fragment in placed:
        if at >= len(starts):
            tail.append(" " + fragment)
            continue
        pieces.append(text[previous : starts[at]])
        pieces.append(fragment + " ")
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
    starts = _starts_of(text)
    picks = 1 if repeats is not None else insertions
    places = repeats if repeats is not None else insertions
    # Each sample draws `picks` fragments, then `places` boundaries: every size is known
    # before the first draw, so a case's draws are made in one call.
    sizes = ([len(fragments)] * picks + [len(starts) + 1] * places) * samples
    drawn = stream.draw_each(sizes)
    candidates = []
    for first in range(0, len(sizes), picks + places):
        chosen = [fragments[i] for i in drawn[first : first + picks]]
        if repeats is not None:
            chosen *= repeats
        # by boundary, fragments at the same one in drawn order (a stable sort)
        placed = sorted(zip(drawn[first + picks : first + picks + places], chosen, strict=True),
                        key=_first)
        steps = shared_step_list("at", "text", tuple(placed))
        candidates.append((steps, _inserted(text, placed, starts)))
    return case.finish(candidates)


def _irrelevant(config: IrrelevantContext, original: Original) -> Generated:
    return generate(config.fragments, config.samples, original.stream(), original.text_case(),
                    insertions=config.insertions)


def _repeated(config: RepeatedContext, original: Original) -> Generated:
    return generate(config.fragments, config.samples, original.stream(), original.text_case(),
                    repeats=config.repeats)


IRRELEVANT_CONTEXT = Transformation(_irrelevant, text_edit(insert), shrink=drop_one_step,
                                    shared_steps=True)
REPEATED_CONTEXT = Transformation(_repeated, text_edit(insert), shrink=drop_one_step,
                                  shared_steps=True)
