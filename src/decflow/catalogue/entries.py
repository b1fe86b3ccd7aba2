"""Persona catalogues: versioned data files, their entries per axis, and persona → slot values.

A catalogue (``decflow/catalogue/<language>.json``) holds grammar as data: gender forms (honorific,
pronouns, and in German articles and the applicant noun), names keyed by (ethnicity, gender)
with gendered surname forms, religion clauses built from frames shared by every group, and
occupations with their gender forms. The file's SHA-256 is recorded with every run, and it
seeds the pools, so editing a list changes the drawn personas visibly rather than silently.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

AXES = ("gender", "ethnicity", "religion", "role")
GENDERS = ("female", "male")
LANGUAGES = ("en", "de")

# Slots that every language fills; a catalogue's gender forms add their own (German
# articles, dative pronoun). Each slot also has a `<slot>_cap` form for sentence starts.
BASE_SLOTS = ("full_name", "first_name", "last_name", "occupation", "religion_clause")

# Which slots each axis may change. Gender also re-inflects forms that agree with it
# (German occupations, gendered surnames, the pronoun inside the religion clause): those
# may change on a gender pair only as two forms of one catalogue entry.
AGREEING_SLOTS = ("last_name", "occupation", "religion_clause")


@dataclass(frozen=True)
class Entry:
    """One catalogue value of an axis.

    ``group`` is the axis value a pair contrasts; ``cell`` is the context a cross pair holds
    fixed (the gender of an ethnicity pair, the ethnicity of a gender pair, the frame of a
    religion pair); ``values`` are the persona fields the entry sets.
    """

    axis: str
    id: str
    group: str
    cell: str
    values: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Persona:
    gender: str
    ethnicity: str
    first_index: int  # into the (ethnicity, gender) first-name list
    last_index: int  # into the ethnicity's surname list
    religion: str
    frame: int
    role: str
    occupation: int


@dataclass(frozen=True)
class Catalogue:
    language: str
    version: str
    sha256: str
    default_template: str
    genders: dict[str, dict[str, str]]
    first_names: dict[tuple[str, str], list[str]]  # (ethnicity, gender) → first names
    last_names: dict[str, list[dict[str, str]]]  # ethnicity → surnames by gender
    frames: dict[str, list[str]]  # gender → religion clause frames with {place}
    places: dict[str, str]  # religion group → place phrase
    occupations: dict[str, list[dict[str, str]]]  # role tier → occupations by gender

    @cached_property
    def entries(self) -> dict[str, list[Entry]]:
        """Every entry per axis, sorted by id (the order pools are drawn from)."""
        return _entries(self)

    @property
    def slot_names(self) -> tuple[str, ...]:
        forms = next(iter(self.genders.values()))
        names = BASE_SLOTS + tuple(forms)
        return names + tuple(f"{name}_cap" for name in names)

    def owned_slots(self, axis: str) -> frozenset[str]:
        """Slots a pair on ``axis`` may change outright (agreement forms come on top)."""
        names = {
            "gender": {"first_name", "full_name", *self.genders["female"]},
            "ethnicity": {"first_name", "last_name", "full_name"},
            "religion": {"religion_clause"},
            "role": {"occupation"},
        }[axis]
        return frozenset(names | {f"{name}_cap" for name in names})

    def agreement_forms(self, slot: str) -> set[frozenset[str]]:
        """Sets of strings that are gender forms of one entry for an agreeing slot."""
        base = slot.removesuffix("_cap")
        if base == "last_name":
            groups = [list(forms.values()) for names in self.last_names.values() for forms in names]
        elif base == "occupation":
            groups = [list(forms.values()) for tier in self.occupations.values() for forms in tier]
        elif base == "religion_clause":
            groups = [
                [self.frames[g][v].format(place=place) for g in GENDERS]
                for place in self.places.values()
                for v in range(len(self.frames[GENDERS[0]]))
            ]
        else:
            return set()
        if slot.endswith("_cap"):
            groups = [[_cap(text) for text in forms] for forms in groups]
        return {frozenset(forms) for forms in groups}

    def slots(self, persona: Persona) -> dict[str, str]:
        """Every slot value for a persona (gender forms re-inflected)."""
        g = persona.gender
        first = self.first_names[(persona.ethnicity, g)][persona.first_index]
        last = self.last_names[persona.ethnicity][persona.last_index][g]
        values = dict(self.genders[g])
        values.update(
            first_name=first,
            last_name=last,
            full_name=f"{first} {last}",
            occupation=self.occupations[persona.role][persona.occupation][g],
            religion_clause=self.frames[g][persona.frame].format(
                place=self.places[persona.religion]
            ),
        )
        values.update({f"{name}_cap": _cap(text) for name, text in list(values.items())})
        return values


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _by_gender(value: str | dict[str, str], where: str) -> dict[str, str]:
    forms = {g: value for g in GENDERS} if isinstance(value, str) else dict(value)
    if set(forms) != set(GENDERS):
        raise ValueError(f"{where}: gender forms must be exactly {GENDERS}, got {sorted(forms)}")
    for text in forms.values():
        if unicodedata.normalize("NFC", text) != text or not text.strip():
            raise ValueError(f"{where}: {text!r} must be non-blank NFC text")
    return forms


def _entries(cat: Catalogue) -> dict[str, list[Entry]]:
    gender, ethnicity, religion, role = [], [], [], []
    for (eth, g), names in cat.first_names.items():
        n_last = len(cat.last_names[eth])
        for i in range(len(names)):
            gender.append(
                Entry(
                    "gender",
                    f"{g}/{eth}/{i}",
                    g,
                    eth,
                    (("gender", g), ("ethnicity", eth), ("first_index", i)),
                )
            )
            ethnicity.append(
                Entry(
                    "ethnicity",
                    f"{eth}/{g}/{i}",
                    eth,
                    g,
                    (
                        ("ethnicity", eth),
                        ("gender", g),
                        ("first_index", i),
                        ("last_index", i % n_last),
                    ),
                )
            )
    for rel in cat.places:
        for v in range(len(cat.frames[GENDERS[0]])):
            religion.append(
                Entry("religion", f"{rel}/{v}", rel, str(v), (("religion", rel), ("frame", v)))
            )
    for tier, jobs in cat.occupations.items():
        for k in range(len(jobs)):
            role.append(Entry("role", f"{tier}/{k}", tier, "", (("role", tier), ("occupation", k))))
    lists = {"gender": gender, "ethnicity": ethnicity, "religion": religion, "role": role}
    return {axis: sorted(items, key=lambda e: e.id) for axis, items in lists.items()}


def parse_catalogue(raw: bytes) -> Catalogue:
    """Build a catalogue from the bytes of a catalogue file (validated as it is read)."""
    doc = json.loads(raw.decode("utf-8"))
    language = doc["language"]
    genders = {g: dict(doc["genders"]["values"][g]) for g in GENDERS}
    if len({tuple(sorted(forms)) for forms in genders.values()}) != 1:
        raise ValueError(f"{language}: every gender must define the same forms")
    first_names: dict[tuple[str, str], list[str]] = {}
    last_names: dict[str, list[dict[str, str]]] = {}
    for eth, spec in doc["ethnicity"]["groups"].items():
        for g in GENDERS:
            names = [_by_gender(n, f"{language} ethnicity {eth}")[g] for n in spec["first"][g]]
            first_names[(eth, g)] = names
        last_names[eth] = [_by_gender(n, f"{language} ethnicity {eth}") for n in spec["last"]]
    frames = {g: list(doc["religion"]["frames"][g]) for g in GENDERS}
    if len({len(items) for items in frames.values()}) != 1:
        raise ValueError(f"{language}: religion frames must have the same count per gender")
    places = {rel: spec["place"] for rel, spec in doc["religion"]["groups"].items()}
    occupations = {
        tier: [_by_gender(job, f"{language} role {tier}") for job in jobs]
        for tier, jobs in doc["role"]["groups"].items()
    }
    return Catalogue(
        language=language,
        version=str(doc["version"]),
        sha256="sha256:" + hashlib.sha256(raw).hexdigest(),
        default_template=doc["default_template"],
        genders=genders,
        first_names=first_names,
        last_names=last_names,
        frames=frames,
        places=places,
        occupations=occupations,
    )


@cache
def load_catalogue(language: str) -> Catalogue:
    """The packaged catalogue for ``language`` (en or de)."""
    if language not in LANGUAGES:
        raise ValueError(f"no persona catalogue for language {language!r}; use one of {LANGUAGES}")
    raw = resources.files("decflow.catalogue").joinpath(f"{language}.json")
    return parse_catalogue(raw.read_bytes())
