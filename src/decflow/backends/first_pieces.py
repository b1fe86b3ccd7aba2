"""Which returned first tokens count for which label under a first-token (`logprobs`) readout.

A server's `top_logprobs` name candidate next tokens by their text. A label's **forms** are
its shown form with and without a leading space (a model often answers ` negative` after
"Answer:"), plus, for labels (not option codes), its case variants (lower, Capitalised,
UPPER) with and without the space. The **first piece** of a form is the text of the first
token the server's tokenizer makes of it (special tokens such as a BOS removed). A returned
token counts for a label when its text *equals* one of the label's first pieces; tokens are
never matched by prefix (SmolLM2 splits `refund` as `ref`+`und` and `reject` as `re`+`ject`:
the token `re` belongs to `reject` only).

Collisions, per presentation (the labels shown together in one request):
- two labels whose *shown* forms share a first piece cannot be told apart by the first
  token (SmolLM2: `Replace` and `Reject` both start with `Re`): a true collision, which the
  run must not meet under this readout;
- a case variant whose first piece belongs to another label too (`Replace`'s and
  `Reject`'s when `replace` and `reject` are shown) counts for neither label and is listed.
A form whose first piece is only whitespace says nothing about the label and is ignored.

Without a tokenizer, `character_collisions` is the conservative fallback: it refuses any
label pair whose first token *might* be shared, whatever the tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any


@dataclass(frozen=True, slots=True)
class Collision:
    """Two labels of one presentation whose shown forms share the first piece `piece`."""

    first: str
    second: str
    piece: str


@dataclass(frozen=True, slots=True)
class PieceTable:
    """The first pieces that count for each label of one presentation.

    `labels` are the names read out (shown labels or option codes); `pieces[label]` the
    first pieces that count for it; `colliding_variants` the case-variant pieces that count
    for no label, with the labels they belong to.
    """

    labels: tuple[str, ...]
    pieces: Mapping[str, tuple[str, ...]]
    colliding_variants: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def owners(self) -> dict[str, str]:
        """piece → the one label it counts for."""
        return {piece: label for label, pieces in self.pieces.items() for piece in pieces}

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "first_pieces": {label: list(self.pieces[label]) for label in self.labels},
            "colliding_variants": [
                {"piece": piece, "labels": list(labels)}
                for piece, labels in self.colliding_variants
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PieceTable:
        return cls(
            tuple(data["labels"]),
            {label: tuple(pieces) for label, pieces in data["first_pieces"].items()},
            tuple((item["piece"], tuple(item["labels"])) for item in data["colliding_variants"]),
        )


def table_key(labels: Iterable[str]) -> tuple[str, ...]:
    """Presentations that show the same labels in another order share one table."""
    return tuple(sorted(labels))


def spaced(form: str) -> tuple[str, ...]:
    """The form as written and with one leading space."""
    return (form, " " + form)


def case_variants(label: str) -> tuple[str, ...]:
    """lower, Capitalised and UPPER forms that differ from the label as shown."""
    variants: list[str] = []
    for variant in (label.lower(), label.capitalize(), label.upper()):
        if variant != label and variant not in variants:
            variants.append(variant)
    return tuple(variants)


def forms_needed(labels: Sequence[str], *, variants: bool) -> set[str]:
    """Every text whose first piece `build_table` asks for."""
    needed: set[str] = set()
    for label in labels:
        needed.update(spaced(label))
        if variants:
            for variant in case_variants(label):
                needed.update(spaced(variant))
    return needed


def _usable_pieces(first_piece: Callable[[str], str | None], texts: Iterable[str]) -> set[str]:
    """First pieces of `texts`, without empty or whitespace-only ones."""
    return {p for p in map(first_piece, texts) if p and not p.isspace()}


def build_table(
    labels: Sequence[str], first_piece: Callable[[str], str | None], *, variants: bool
) -> tuple[PieceTable, list[Collision], list[str]]:
    """The table of one presentation, its true collisions and the labels without any
    usable first piece. `first_piece(text)` is the tokenizer's first piece of `text`."""
    shown = {label: _usable_pieces(first_piece, spaced(label)) for label in labels}
    collisions = [
        Collision(a, b, piece)
        for a, b in combinations(labels, 2)
        for piece in sorted(shown[a] & shown[b])
    ]
    extra: dict[str, set[str]] = {label: set() for label in labels}
    if variants:
        for label in labels:
            for variant in case_variants(label):
                extra[label] |= _usable_pieces(first_piece, spaced(variant)) - shown[label]
    claims: dict[str, list[str]] = {}
    for label in labels:
        for piece in shown[label] | extra[label]:
            claims.setdefault(piece, []).append(label)
    pieces: dict[str, set[str]] = {label: set() for label in labels}
    dropped: list[tuple[str, tuple[str, ...]]] = []
    for piece, owners in sorted(claims.items()):
        by_shown = [owner for owner in owners if piece in shown[owner]]
        if len(owners) == 1:
            pieces[owners[0]].add(piece)
        elif len(by_shown) <= 1:
            # a case variant shared with another label counts for neither; a label's own
            # shown piece stays its own
            if by_shown:
                pieces[by_shown[0]].add(piece)
            dropped.append((piece, tuple(owners)))
        # two labels showing the same piece: a true collision, counted for no label
    without = [label for label in labels if not pieces[label]]
    table = PieceTable(
        tuple(labels), {label: tuple(sorted(pieces[label])) for label in labels}, tuple(dropped)
    )
    return table, collisions, without


# -- without a tokenizer --------------------------------------------------------------------


def _folded(label: str) -> str:
    return label.strip().casefold()


def character_collisions(shown_labels: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of labels whose first token may be shared, judged from characters alone.

    Conservative and tokenizer-independent, on stripped, case-folded forms: two labels
    collide when one is a prefix of the other, when they share their first two characters
    (a first token such as "Re" for "Replace"/"Reject" lies inside the shared part), or when
    they share a first character that is not a letter (tokenizers emit punctuation and
    digits as tokens of their own: `"yes"`/`"no"`).
    """
    pairs = []
    for a, b in combinations(shown_labels, 2):
        x, y = _folded(a), _folded(b)
        shared = 0
        while shared < min(len(x), len(y)) and x[shared] == y[shared]:
            shared += 1
        if x.startswith(y) or y.startswith(x) or shared >= 2 or (
            shared == 1 and not x[0].isalpha()
        ):
            pairs.append((a, b))
    return pairs


def character_owner(token: str, labels: Sequence[str]) -> str | None:
    """The label a returned token starts, by characters (no tokenizer known): the one label
    whose case-folded form begins with the stripped, case-folded token. Sound only for
    labels that pass `character_collisions`, where no token can start two labels."""
    piece = _folded(token)
    if not piece:
        return None
    matching = [label for label in labels if _folded(label).startswith(piece)]
    return matching[0] if len(matching) == 1 else None
