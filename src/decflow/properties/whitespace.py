"""whitespace: replace whitespace runs, add leading or trailing blanks.

Targets are `"start"`, each whitespace run by index, and `"end"`. Step: `{"at", "ws"}`,
sorted start, runs ascending, end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING

from decflow.properties.base import (
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
    from decflow.contracts.properties import Whitespace

_RUN = re.compile(r"\s+")
RUN_CHOICES = ("  ", "\n", "\t", " \n")
START_CHOICES = (" ", "\n")
END_CHOICES = (" ", "\n", "  \n")
# Per current run: the replacements that differ from it (cached: runs repeat a lot).
_OTHER_CHOICES: dict[str, tuple[str, ...]] = {}


_first = itemgetter(0)


def _render(text: str, spans: Sequence[tuple[int, int]], steps: Sequence[Step]) -> str:
    """The text with the runs (given as spans) and ends that `steps` name replaced."""
    start = end = ""
    replaced: list[tuple[int, str]] = []
    for step in steps:
        at = step["at"]
        if at == "start":
            start = step["ws"]
        elif at == "end":
            end = step["ws"]
        else:
            replaced.append((int(at), step["ws"]))
    pieces = [start]
    previous = 0
    for index, ws in sorted(replaced) if len(replaced) > 1 else replaced:
        run_start, run_end = spans[index]
        pieces.append(text[previous:run_start])
        pieces.append(ws)
        previous = run_end
    pieces.append(text[previous:])
    pieces.append(end)
    return "".join(pieces)


def apply(text: str, steps: Sequence[Step]) -> str:
    return _render(text, [m.span() for m in _RUN.finditer(text)], steps)


def _choices(run: str) -> tuple[str, ...]:
    found = _OTHER_CHOICES.get(run)
    if found is None:
        found = tuple(c for c in RUN_CHOICES if c != run)
        if len(_OTHER_CHOICES) < 1024:
            _OTHER_CHOICES[run] = found
    return found


def generate(config: Whitespace, stream: Stream, case: TextCase) -> Generated:
    text = case.text
    spans = []
    runs = []
    for match in _RUN.finditer(text):
        spans.append(match.span())
        runs.append(match.group())
    # Target t: 0 = start, 1..len(runs) = run t-1, last = end; so t orders the steps.
    last = len(runs) + 1
    targets = range(last + 1)
    edits = min(config.edits, last + 1)
    # The replacements of each target (its current whitespace excluded for a run).
    options = [START_CHOICES, *map(_choices, runs), END_CHOICES]
    at_of: list[int | str] = ["start", *range(len(runs)), "end"]
    candidates = []
    for _ in range(config.samples):
        picked = stream.sample(targets, edits)
        drawn = stream.draw_each([len(options[t]) for t in picked])
        steps = [
            {"at": at_of[t], "ws": options[t][d]}
            for t, d in sorted(zip(picked, drawn, strict=True), key=_first)
        ]
        candidates.append((steps, _render(text, spans, steps)))
    return case.finish(candidates)


def _generate(config: Whitespace, original: Original) -> Generated:
    return generate(config, original.stream(), original.text_case())


WHITESPACE = Transformation(_generate, text_edit(apply), shrink=drop_one_step)
