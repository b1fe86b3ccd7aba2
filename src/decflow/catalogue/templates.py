"""Persona templates: the slots a template names, and those a catalogue cannot fill.

Shared by contract validation (which names unknown slots) and the persona renderer.
"""

from __future__ import annotations

import string
from functools import lru_cache

from decflow.catalogue.entries import Catalogue


@lru_cache(maxsize=64)
def template_pieces(template: str) -> tuple[tuple[str, str | None], ...]:
    # string.Formatter handles the template's {{ }} escapes; the case text is appended verbatim.
    return tuple((literal, name) for literal, name, _, _ in string.Formatter().parse(template))


def template_slots(template: str) -> list[str]:
    return [name for _, name in template_pieces(template) if name is not None]


def unknown_slots(template: str, catalogue: Catalogue) -> list[str]:
    """Template placeholders the catalogue cannot fill (for contract validation)."""
    known = set(catalogue.slot_names)
    return sorted({name for name in template_slots(template) if name not in known})
