"""whitespace: replace whitespace runs, add leading or trailing blanks.

Targets are `"start"`, each whitespace run by index, and `"end"`. Step: `{"at", "ws"}`,
sorted start, runs ascending, end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import getitem
from typing import TYPE_CHECKING

from decflow.properties.base import (
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
    from decflow.contracts.properties import Whitespace

# The text split around its whitespace runs: text pieces at even indexes, runs at odd ones.
_RUN_SPLIT = re.compile(r"(\s+)")
RUN_CHOICES = ("  ", "\n", "\t", " \n")
START_CHOICES = (" ", "\n")
END_CHOICES = (" ", "\n", "  \n")
# Per current run: the replacements that differ from it (cached: runs repeat a lot).
_OTHER_CHOICES: dict[str, tuple[str, ...]] = {}


def _render(parts: Sequence[str], edits: Sequence[tuple[int, str]]) -> str:
    """The text split around its runs (`_RUN_SPLIT`: run t-1 at parts[2t - 1]) with `edits`
    made: (target, whitespace), target 0 the start, t a run, the last target the end. Two
    edits of one run both go in, in the order given (the last edit of start or end wins)."""
    last = len(parts) // 2 + 1
    pieces = list(parts)
    edited: set[int] = set()
    start = end = ""
    for target, ws in edits:
        if target == 0:
            start = ws
        elif target == last:
            end = ws
        else:
            at = 2 * target - 1
            pieces[at] = pieces[at] + ws if at in edited else ws
            edited.add(at)
    return start + "".join(pieces) + end


def _run_target(at: int | str, last: int) -> int:
    index = int(at)
    if not 0 <= index < last - 1:
        raise IndexError(f"whitespace step names run {at}; the text has {last - 1}")
    return index + 1


def apply(text: str, steps: Sequence[Step]) -> str:
    parts = _RUN_SPLIT.split(text)
    last = len(parts) // 2 + 1
    edits = [(0 if step["at"] == "start" else last if step["at"] == "end"
              else _run_target(step["at"], last), step["ws"]) for step in steps]
    # runs in (index, whitespace) order; start and end where they are (the last one wins)
    runs = sorted(edit for edit in edits if 0 < edit[0] < last)
    return _render(parts, [*(e for e in edits if e[0] in (0, last)), *runs])


def _choices(run: str) -> tuple[str, ...]:
    found = _OTHER_CHOICES.get(run)
    if found is None:
        found = tuple(c for c in RUN_CHOICES if c != run)
        if len(_OTHER_CHOICES) < 1024:
            _OTHER_CHOICES[run] = found
    return found


@dataclass(slots=True)
class _Layout:
    """What generation needs of a text, by target: its pieces (`_RUN_SPLIT`), the
    replacements each target may draw and the target's name in a step."""

    parts: list[str]
    choices: list[tuple[str, ...]]
    names: list[int | str]


# Layouts of recent texts: datasets repeat texts (cleared when full; a layout is read-only).
_LAYOUTS: dict[str, _Layout] = {}
_LAYOUTS_KEPT = 4096


def _layout(text: str) -> _Layout:
    found = _LAYOUTS.get(text)
    if found is None:
        parts = _RUN_SPLIT.split(text)
        runs = len(parts) // 2
        found = _Layout(
            parts,
            [START_CHOICES, *(_choices(parts[2 * t + 1]) for t in range(runs)), END_CHOICES],
            ["start", *range(runs), "end"],
        )
        if len(_LAYOUTS) >= _LAYOUTS_KEPT:
            _LAYOUTS.clear()
        _LAYOUTS[text] = found
    return found


def generate(config: Whitespace, stream: Stream, case: TextCase) -> Generated:
    layout = _layout(case.text)
    parts, choices, names = layout.parts, layout.choices, layout.names
    # Target t: 0 = start, 1..runs = run t-1 (at parts[2t - 1]), the last = end; t orders steps.
    targets = range(len(choices))
    edits = min(config.edits, len(choices))
    sample, draw_each = stream.sample, stream.draw_each
    candidates = []
    for _ in range(config.samples):
        picked = sample(targets, edits)
        options = [choices[t] for t in picked]
        drawn = draw_each([len(c) for c in options])
        # targets are distinct: the pairs sort by target
        made = sorted(zip(picked, map(getitem, options, drawn), strict=True))
        steps = shared_step_list("at", "ws", tuple([(names[t], ws) for t, ws in made]))
        candidates.append((steps, _render(parts, made)))
    return case.finish(candidates)


def _generate(config: Whitespace, original: Original) -> Generated:
    return generate(config, original.stream(), original.text_case())


WHITESPACE = Transformation(_generate, text_edit(apply), shrink=drop_one_step,
                            shared_steps=True)
