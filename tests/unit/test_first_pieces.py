"""First-piece tables: which first tokens count for which label (pure functions)."""

from __future__ import annotations

import pytest

from decflow.backends.first_pieces import (
    Collision,
    PieceTable,
    build_table,
    case_variants,
    character_collisions,
    character_owner,
    forms_needed,
)

# How SmolLM2-135M tokenizes these forms (real-models.md, measured with /extras/tokenize):
# the first piece of each form.
SMOLLM2 = {
    "refund": "ref", " refund": " refund", "Refund": "Ref", " Refund": " Ref",
    "REFUND": "REF", " REFUND": " REF",
    "replace": "replace", " replace": " replace", "Replace": "Re", " Replace": " Replace",
    "REPLACE": "RE", " REPLACE": " RE",
    "reject": "re", " reject": " reject", "Reject": "Re", " Reject": " Reject",
    "REJECT": "RE", " REJECT": " RE",
}


def test_case_variants_and_forms() -> None:
    assert case_variants("refund") == ("Refund", "REFUND")
    assert case_variants("REFUND") == ("refund", "Refund")
    assert case_variants("Not spam") == ("not spam", "NOT SPAM")
    assert case_variants("A") == ("a",)
    assert forms_needed(["no"], variants=False) == {"no", " no"}
    assert forms_needed(["no"], variants=True) == {"no", " no", "No", " No", "NO", " NO"}


def test_equal_pieces_only_and_colliding_variants_count_for_neither() -> None:
    table, collisions, without = build_table(
        ("refund", "replace", "reject"), SMOLLM2.__getitem__, variants=True
    )
    assert collisions == [] and without == []
    # "re" is reject's own first piece: it counts for reject, never for refund/replace
    assert table.pieces["reject"] == (" Reject", " reject", "re")
    assert table.pieces["replace"] == (" Replace", " replace", "replace")
    assert table.pieces["refund"] == (" REF", " Ref", " refund", "REF", "Ref", "ref")
    # Replace/Reject and REPLACE/REJECT share "Re", "RE", " RE": listed, counted for neither
    assert table.colliding_variants == (
        (" RE", ("replace", "reject")), ("RE", ("replace", "reject")),
        ("Re", ("replace", "reject")),
    )
    owners = table.owners()
    assert owners["re"] == "reject" and "Re" not in owners and "r" not in owners


def test_shown_forms_sharing_a_piece_are_a_true_collision() -> None:
    table, collisions, _ = build_table(
        ("Replace", "Reject", "Refund"), SMOLLM2.__getitem__, variants=True
    )
    assert collisions == [Collision("Replace", "Reject", "Re")]
    assert "Re" not in table.owners()


def test_a_variant_never_takes_another_labels_shown_piece() -> None:
    pieces = {"on": "on", " on": " on", "On": "On", " On": " On", "ON": "ON", " ON": " ON",
              "One": "On", " One": " One", "one": "one", " one": " one",
              "ONE": "ON", " ONE": " ONE"}
    table, collisions, _ = build_table(("One", "on"), pieces.__getitem__, variants=True)
    assert collisions == []
    # "On" is One's shown first piece and also on's capitalised variant: it stays One's
    assert "On" in table.pieces["One"] and "On" not in table.pieces["on"]
    assert ("On", ("One", "on")) in table.colliding_variants
    # "ON" is a variant of both: neither gets it
    assert "ON" not in table.owners()


def test_whitespace_first_pieces_are_ignored() -> None:
    pieces = {"yes": "yes", " yes": " ", "no": "no", " no": " "}
    table, collisions, without = build_table(("yes", "no"), pieces.__getitem__, variants=False)
    assert collisions == [] and without == []
    assert table.pieces == {"yes": ("yes",), "no": ("no",)}
    _, _, without = build_table(("x",), {"x": " ", " x": ""}.__getitem__, variants=False)
    assert without == ["x"]


def test_table_json_round_trip() -> None:
    table, _, _ = build_table(("refund", "replace", "reject"), SMOLLM2.__getitem__,
                              variants=True)
    assert PieceTable.from_json(table.to_json()) == table


@pytest.mark.parametrize(
    ("labels", "pairs"),
    [
        (("billing", "shipping", "technical"), []),
        (("yes", "no"), []),
        (("spam", "safe"), []),
        (("A) refund", "B) reject", "C) review"), []),
        (("positive", "negative", "neutral"), [("negative", "neutral")]),
        (("Replace", "Reject", "Keep"), [("Replace", "Reject")]),
        (("REPLACE", "REJECT"), [("REPLACE", "REJECT")]),
        (("high", "highest", "low"), [("high", "highest")]),
        (("spam", "SPAM"), [("spam", "SPAM")]),
        (('"yes"', '"no"'), [('"yes"', '"no"')]),
        (("[spam]", "[ham]"), [("[spam]", "[ham]")]),
    ],
)
def test_character_collisions(labels: tuple[str, ...], pairs: list[tuple[str, str]]) -> None:
    assert character_collisions(labels) == pairs


def test_character_owner() -> None:
    labels = ("billing", "shipping", "technical")
    assert character_owner(" Bill", labels) == "billing"
    assert character_owner("t", labels) == "technical"
    assert character_owner("billings", labels) is None
    assert character_owner(" ", labels) is None
