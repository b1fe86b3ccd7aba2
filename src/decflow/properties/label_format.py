"""label_format: show the labels in another surface form, or by their aliases.

Steps: `{"label", "style"}` or `{"label", "alias"}`, one per label whose shown form changes.
Labels keep their contract order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from decflow.properties.base import (
    Generated,
    Input,
    Original,
    Presentation,
    Step,
    Transformation,
    finish,
)
from decflow.properties.stream import Stream

if TYPE_CHECKING:
    from decflow.contracts.properties import LabelFormat

def _lettered(label: str, index: int) -> str:
    return f"{chr(ord('A') + index)}) {label}" if index < 26 else f"{index + 1}) {label}"


STYLES: dict[str, Callable[[str, int], str]] = {
    "upper": lambda label, _i: label.upper(),
    "lower": lambda label, _i: label.lower(),
    "capitalized": lambda label, _i: label[:1].upper() + label[1:],
    "lettered": _lettered,
    "numbered": lambda label, i: f"{i + 1}. {label}",
    "quoted": lambda label, _i: f'"{label}"',
    "bracketed": lambda label, _i: f"[{label}]",
}


def variants(
    styles: Sequence[str], aliases: Mapping[str, Sequence[str]], labels: Sequence[str]
) -> list[list[Step]]:
    """Candidate step lists: one per style that changes a label, then one per alias index."""
    found: list[list[Step]] = []
    for style in styles:
        form = STYLES[style]
        found.append(
            [{"label": lab, "style": style} for i, lab in enumerate(labels) if form(lab, i) != lab]
        )
    depth = max((len(v) for v in aliases.values()), default=0)
    for k in range(depth):
        found.append(
            [
                {"label": lab, "alias": aliases[lab][k]}
                for lab in labels
                if len(aliases.get(lab, ())) > k and aliases[lab][k] != lab
            ]
        )
    return [steps for steps in found if steps and labels_distinct(steps, labels)]


def _shown(steps: Sequence[Step], labels: Sequence[str]) -> list[str]:
    index = {lab: i for i, lab in enumerate(labels)}
    shown = list(labels)
    for step in steps:
        i = index[step["label"]]
        shown[i] = step["alias"] if "alias" in step else STYLES[step["style"]](labels[i], i)
    return shown


def labels_distinct(steps: Sequence[Step], labels: Sequence[str]) -> bool:
    """Whether a step list shows every label differently (also checked when shrinking)."""
    return len(set(_shown(steps, labels))) == len(labels)


@lru_cache(maxsize=64)
def _presented_variants(
    styles: tuple[str, ...],
    aliases: tuple[tuple[str, tuple[str, ...]], ...],
    labels: tuple[str, ...],
) -> list[tuple[list[Step], Presentation]]:
    # The variants depend on the settings and labels only: built once per run, shared by
    # every case (callers treat steps and presentations as read-only).
    found = variants(styles, dict(aliases), labels)
    return [(steps, presentation(steps, labels)) for steps in found]


def generate(
    config: LabelFormat, stream: Stream, original: Input, labels: Sequence[str]
) -> Generated:
    aliases = tuple((lab, tuple(names)) for lab, names in (config.aliases or {}).items())
    found = _presented_variants(tuple(config.styles), aliases, tuple(labels))
    chosen = stream.sample(found, min(config.samples, len(found)))
    return finish(original, [(steps, original, shown) for steps, shown in chosen])


def presentation(steps: Sequence[Step], labels: Sequence[str]) -> Presentation:
    if not steps:
        return None
    return list(zip(_shown(steps, labels), labels, strict=True))


def _fewer_labels(steps: list[Step], labels: Sequence[str]) -> Iterator[list[Step]]:
    """Each label's step left out in turn, while the labels still show distinctly."""
    for i in range(len(steps)):
        fewer = steps[:i] + steps[i + 1 :]
        if fewer and labels_distinct(fewer, labels):
            yield fewer


def _generate(config: LabelFormat, original: Original) -> Generated:
    return generate(config, original.stream(), original.input, original.labels)


def _apply(steps: Sequence[Step], original: Original) -> tuple[Input, Presentation]:
    return original.input, presentation(steps, original.labels)


LABEL_FORMAT = Transformation(_generate, _apply, shrink=_fewer_labels, shared_steps=True)
