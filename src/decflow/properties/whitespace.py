"""whitespace: replace whitespace runs, add leading or trailing blanks.

Targets are `"start"`, each whitespace run by index, and `"end"`. Step: `{"at", "ws"}`,
sorted start, runs ascending, end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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


def _render(text: str, spans: Sequence[tuple[int, int]], edits: Sequence[tuple[int, str]]) -> str:
    """The text with `edits` made: (target, whitespace) in target order, target 0 the
    start, t the run at `spans[t - 1]`, len(spans) + 1 the end."""
    last = len(spans) + 1
    pieces = []
    previous = 0
    end = ""
    for target, ws in edits:
        if target == 0:
            pieces.append(ws)
        elif target == last:
            end = ws
        else:
            run_start, run_end = spans[target - 1]
            pieces.append(text[previous:run_start])
            pieces.append(ws)
            previous = run_end
    pieces.append(text[previous:])
    pieces.append(end)
    return "".join(pieces)


def apply(text: str, steps: Sequence[Step]) -> str:
    spans = [m.span() for m in _RUN.finditer(text)]
    start: list[tuple[int, str]] = []
    end: list[tuple[int, str]] = []
    replaced: list[tuple[int, str]] = []
    for step in steps:
        at = step["at"]
        if at == "start":
            start = [(0, step["ws"])]  # the last one named wins
        elif at == "end":
            end = [(len(spans) + 1, step["ws"])]
        else:
            replaced.append((int(at) + 1, step["ws"]))
    return _render(text, spans, [*start, *sorted(replaced), *end])


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
    # The replacements of each target: 0 = start, t = run t-1 (its current whitespace
    # excluded), last = end; so t orders the steps.
    options: list[tuple[str, ...]] = [START_CHOICES]
    for match in _RUN.finditer(text):
        spans.append(match.span())
        options.append(_choices(match.group()))
    options.append(END_CHOICES)
    last = len(spans) + 1
    targets = range(last + 1)
    edits = min(config.edits, last + 1)
    sizes = [len(choices) for choices in options]
    sample, draw_each = stream.sample, stream.draw_each
    candidates = []
    for _ in range(config.samples):
        picked = sample(targets, edits)
        # targets are distinct: the pairs sort by target
        made = [
            (t, options[t][d])
            for t, d in sorted(zip(picked, draw_each([sizes[t] for t in picked]), strict=True))
        ]
        steps: list[Step] = [
            {"at": "start" if t == 0 else "end" if t == last else t - 1, "ws": ws}
            for t, ws in made
        ]
        candidates.append((steps, _render(text, spans, made)))
    return case.finish(candidates)


def _generate(config: Whitespace, original: Original) -> Generated:
    return generate(config, original.stream(), original.text_case())


WHITESPACE = Transformation(_generate, text_edit(apply), shrink=drop_one_step)
