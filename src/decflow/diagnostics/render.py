"""Putting a persona into a case input, and checking that a pair differs on one axis only.

A text with persona slots (``{full_name}``, ``{occupation}``, …) is filled in place; a text
without any gets the template rendered in front of it. Rendering records where each slot's
value landed, so a pair's two renderings can be diffed and every changed span traced back to
the slot that caused it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from decflow.catalogue.entries import AGREEING_SLOTS, Catalogue
from decflow.catalogue.templates import template_pieces

PREAMBLE_SEPARATOR = "\n\n"
_TEXT_SLOT = re.compile(r"\{([a-z][a-z0-9_]*)\}")

Span = tuple[str, int, int]  # slot name, start, end in the rendered text


@dataclass(frozen=True)
class Rendered:
    value: str | dict[str, Any]  # the input as sent: a string or the object with its text set
    text: str
    spans: tuple[Span, ...]


class RenderError(ValueError):
    """A case the persona axes cannot use; the message is the skip reason."""


def _assemble(pieces: list[tuple[str, str | None]], slots: Mapping[str, str]) -> Rendered:
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    for literal, slot in pieces:
        parts.append(literal)
        pos += len(literal)
        if slot is not None:
            value = slots[slot]
            spans.append((slot, pos, pos + len(value)))
            parts.append(value)
            pos += len(value)
    text = "".join(parts)
    return Rendered(text, text, tuple(spans))


def _text_pieces(text: str, known: frozenset[str]) -> list[tuple[str, str | None]]:
    """Split a case text at known slots; other braces are ordinary text."""
    pieces: list[tuple[str, str | None]] = []
    last = 0
    for match in _TEXT_SLOT.finditer(text):
        if match.group(1) in known:
            pieces.append((text[last : match.start()], match.group(1)))
            last = match.end()
    pieces.append((text[last:], None))
    return pieces


def render_text(
    text: str, slots: Mapping[str, str], template: str, catalogue: Catalogue
) -> Rendered:
    """Fill the text's own slots, or put the template in front of a text without any.

    The template must only use slots the catalogue fills (see ``unknown_slots``).
    """
    known = frozenset(catalogue.slot_names)
    pieces = _text_pieces(text, known)
    if len(pieces) > 1:
        return _assemble(pieces, slots)
    head = [*template_pieces(template), (PREAMBLE_SEPARATOR + text, None)]
    return _assemble(head, slots)


def render_input(
    value: str | Mapping[str, Any],
    slots: Mapping[str, str],
    template: str,
    catalogue: Catalogue,
    text_field: str | None,
) -> Rendered:
    """Render a case input (string, or object whose ``text_field`` holds the text)."""
    if isinstance(value, str):
        return render_text(value, slots, template, catalogue)
    if text_field is None:
        raise RenderError("object input has no text to put a persona in (set fuzz.text_field)")
    text = value.get(text_field)
    if not isinstance(text, str):
        raise RenderError(f"input field '{text_field}' is missing or not a string")
    rendered = render_text(text, slots, template, catalogue)
    return Rendered({**value, text_field: rendered.text}, rendered.text, rendered.spans)


def _touched(spans: tuple[Span, ...], start: int, end: int) -> set[str]:
    if start == end:  # a pure insertion touches the span it sits in or borders
        return {name for name, s, e in spans if s <= start <= e}
    return {name for name, s, e in spans if s < end and start < e}


def changed_slots(a: Rendered, b: Rendered) -> set[str] | None:
    """Slots whose rendered spans differ between two arms; None when the arms are identical.

    A change outside every slot span is reported as the pseudo-slot ``<text>``.
    """
    if a.text == b.text:
        return None
    # Both arms share template and case text, so trimming the common ends keeps the diff
    # small even for long inputs.
    prefix = _common_prefix_length(a.text, b.text)
    limit = min(len(a.text), len(b.text)) - prefix
    suffix = min(_common_prefix_length(a.text[::-1], b.text[::-1]), limit)
    middle_a = a.text[prefix : len(a.text) - suffix]
    middle_b = b.text[prefix : len(b.text) - suffix]
    touched: set[str] = set()
    matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        hit = _touched(a.spans, prefix + i1, prefix + i2) | _touched(
            b.spans, prefix + j1, prefix + j2
        )
        touched |= hit or {"<text>"}
    return touched


def _common_prefix_length(x: str, y: str) -> int:
    """Length of the common prefix, by bisection on C-level slice comparisons."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def off_axis_slots(
    axis: str,
    touched: set[str],
    slots_a: Mapping[str, str],
    slots_b: Mapping[str, str],
    catalogue: Catalogue,
) -> set[str]:
    """Touched slots a pair on ``axis`` may not change.

    Gender may also change agreeing slots (occupation, gendered surname, religion clause),
    but only between two gender forms of one catalogue entry.
    """
    owned = catalogue.owned_slots(axis)
    extra = set()
    for slot in touched - owned:
        if slot in slots_a and slots_a[slot] == slots_b.get(slot):
            continue  # only bordered by a change in a neighbouring slot
        base = slot.removesuffix("_cap")
        if axis == "gender" and base in AGREEING_SLOTS:
            pair = frozenset((slots_a[slot], slots_b[slot]))
            if any(pair <= forms for forms in catalogue.agreement_forms(slot)):
                continue
        extra.add(slot)
    return extra
