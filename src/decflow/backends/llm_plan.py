"""The `openai` backend's readout plan: decided once per run, before the first call.

A run sends originals and transformed cases; if some presentations were read one way and
others another (a collision that appears only in upper-cased labels, say), the difference
would itself look like a violation. So the plan is made from every presentation the run
will send (`label_format` styles included), stored with the run, and used by every process
that calls for it. It holds:

- `readout`, `api`, `options_as`: as configured (the plan never switches readouts);
- for `logprobs`: the tokenizer endpoint that answered (or the endpoints tried and why they
  failed) and the `rule` that follows: `first_pieces` (a table per presentation, see
  `first_pieces`) or, with no tokenizer, the conservative `characters` rule;
- for `sequence`: the echo alignment check (`echo_check`), see `OpenAIBackend`, and how
  labels are scored (`scoring`: `prefix` with the prompt evaluated once, or `echo`; its
  exactness and, for `prefix`, the tolerance and the tokenizer; see `label_scoring`).

Refusals are `ConfigurationError`s (exit 2) that name the labels, the shared first piece
and the readouts that work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decflow.backends.first_pieces import (
    Collision,
    PieceTable,
    build_table,
    character_collisions,
    character_owner,
    forms_needed,
    spaced,
    table_key,
)
from decflow.backends.tokenizer import Tokenizer
from decflow.errors import ConfigurationError

ALTERNATIVES = (
    "Use readout: sequence (with api: completions), which scores whole labels, or "
    "options_as: letters, which asks for option codes; or rename the labels (or drop the "
    "label_format styles that show them so)"
)


@dataclass(slots=True)
class ReadoutPlan:
    readout: str
    api: str
    options_as: str
    rule: str | None = None
    tokenizer: dict[str, Any] | None = None
    tables: dict[tuple[str, ...], PieceTable] = field(default_factory=dict)
    echo_check: dict[str, Any] | None = None
    pieces: dict[str, str | None] = field(default_factory=dict)  # form → its first piece
    scoring: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "readout": self.readout, "api": self.api, "options_as": self.options_as,
        }
        if self.rule is not None:
            data["rule"] = self.rule
            data["tokenizer"] = self.tokenizer
        if self.rule == "first_pieces":
            data["first_pieces"] = [self.tables[key].to_json() for key in sorted(self.tables)]
            data["forms"] = dict(sorted(self.pieces.items()))
        if self.echo_check is not None:
            data["echo_check"] = self.echo_check
        if self.scoring is not None:
            data["scoring"] = self.scoring
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReadoutPlan:
        tables = [PieceTable.from_json(item) for item in data.get("first_pieces", [])]
        return cls(
            data["readout"], data["api"], data["options_as"], data.get("rule"),
            data.get("tokenizer"), {table_key(t.labels): t for t in tables},
            data.get("echo_check"), dict(data.get("forms", {})), data.get("scoring"),
        )

    def missing_forms(self, name_sets: Iterable[Sequence[str]], *, variants: bool) -> set[str]:
        """Forms of these presentations whose first piece the plan does not know."""
        needed: set[str] = set()
        for names in name_sets:
            needed |= forms_needed(names, variants=variants)
        return needed - set(self.pieces)

    def owner(self, names: Sequence[str], exact: bool) -> Any:
        """token text → the name it counts for (or None), for one presentation's names.
        `exact` (option codes under the character rule): only the code itself counts."""
        if self.rule == "first_pieces":
            return self.tables[table_key(names)].owners().get
        if exact:
            return {form: name for name in names for form in spaced(name)}.get
        return lambda token: character_owner(token, names)


def _quoted(items: Iterable[str]) -> str:
    return ", ".join(repr(item) for item in items)


async def add_tables(
    plan: ReadoutPlan, tokenizer: Tokenizer | None, name_sets: Iterable[Sequence[str]], *,
    variants: bool, backend_name: str,
) -> None:
    """Tables for presentations the plan does not have yet; refuses true collisions. The
    tokenizer is asked only for forms the plan does not know (None: it knows them all)."""
    missing = {table_key(names): tuple(names) for names in name_sets}
    missing = {key: names for key, names in missing.items() if key not in plan.tables}
    for text in sorted(plan.missing_forms(missing.values(), variants=variants)):
        assert tokenizer is not None, "add_tables needs the tokenizer for unknown forms"
        plan.pieces[text] = await tokenizer.first_piece(text)
    collisions: dict[tuple[str, str, str], Collision] = {}
    without: set[str] = set()
    endpoint = (plan.tokenizer or {}).get("endpoint")
    tables = {}
    for key, names in missing.items():
        tables[key], found, unusable = build_table(names, plan.pieces.__getitem__,
                                                   variants=variants)
        collisions.update({(c.first, c.second, c.piece): c for c in found})
        without.update(unusable)
    where = f"openai backend '{backend_name}': readout 'logprobs'"
    if collisions:
        named = "; ".join(
            f"{c.first!r} and {c.second!r} (both start with {c.piece!r})"
            for c in collisions.values()
        )
        raise ConfigurationError(
            f"{where} cannot tell these labels apart by the first token of the answer, "
            f"in the server's tokenizer ({endpoint}): {named}. "
            f"{ALTERNATIVES}"
        )
    if without:
        raise ConfigurationError(
            f"{where}: the answers {_quoted(sorted(without))} start with a whitespace token "
            f"in the server's tokenizer, which no label owns. {ALTERNATIVES}"
        )
    plan.tables.update(tables)


def check_characters(
    name_sets: Iterable[Sequence[str]], *, tried: Mapping[str, str], backend_name: str
) -> None:
    """The conservative rule when no tokenizer answered; refuses possible collisions."""
    pairs: dict[tuple[str, str], None] = {}
    for names in name_sets:
        pairs.update(dict.fromkeys(character_collisions(names)))
    if pairs:
        named = "; ".join(f"{a!r} and {b!r}" for a, b in pairs)
        endpoints = "; ".join(f"{url}: {why}" for url, why in tried.items()) or "none"
        raise ConfigurationError(
            f"openai backend '{backend_name}': readout 'logprobs' may not tell these labels "
            f"apart by their first token: {named}. No tokenize endpoint answered ({endpoints}), "
            "so a conservative character rule applies. Set tokenize_url to the server's "
            f"tokenize endpoint if it has one. {ALTERNATIVES}"
        )
