"""whitespace: replace whitespace runs, add leading or trailing blanks.

Targets are `"start"`, each whitespace run by index, and `"end"`. Step: `{"at", "ws"}`,
sorted start, runs ascending, end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
from decflow.properties.stream import Stream

_RUN = re.compile(r"\s+")
RUN_CHOICES = ("  ", "\n", "\t", " \n")
START_CHOICES = (" ", "\n")
END_CHOICES = (" ", "\n", "  \n")


def _order(step: Step) -> int:
    at = step["at"]
    if at == "start":
        return -1
    if at == "end":
        return 1 << 62
    return int(at)


def apply(text: str, steps: Sequence[Step]) -> str:
    replacement = {step["at"]: step["ws"] for step in steps}
    pieces = [replacement.get("start", "")]
    previous = 0
    for index, run in enumerate(_RUN.finditer(text)):
        if index in replacement:
            pieces.append(text[previous : run.start()])
            pieces.append(replacement[index])
            previous = run.end()
    pieces.append(text[previous:])
    pieces.append(replacement.get("end", ""))
    return "".join(pieces)


def generate(config: Any, stream: Stream, original: Input, text_field: str | None) -> Generated:
    try:
        text = get_text(original, text_field)
    except TextNotAvailable as skip:
        return Generated(skip_reason=str(skip))
    runs = [m.group() for m in _RUN.finditer(text)]
    targets: list[int | str] = ["start", *range(len(runs)), "end"]
    candidates = []
    for _ in range(config.samples):
        steps: list[Step] = []
        for at in stream.sample(targets, min(config.edits, len(targets))):
            if at == "start":
                choices: Sequence[str] = START_CHOICES
            elif at == "end":
                choices = END_CHOICES
            else:
                choices = [c for c in RUN_CHOICES if c != runs[int(at)]]
            steps.append({"at": at, "ws": choices[stream.draw(len(choices))]})
        steps.sort(key=_order)
        candidates.append((steps, with_text(original, text_field, apply(text, steps)), None))
    return finish(original, candidates)
