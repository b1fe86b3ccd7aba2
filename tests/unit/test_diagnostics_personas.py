"""Persona catalogues and pair building: seeded, single-axis, placebo partners, rendering."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import unicodedata
from importlib import resources

import pytest

from decflow.catalogue.entries import AXES, GENDERS, load_catalogue
from decflow.catalogue.templates import unknown_slots
from decflow.diagnostics.personas import build_pairs
from decflow.errors import ConfigurationError

CASES_EN = [(f"c{i}", f"I ask for a loan of {1000 + 250 * i} EUR to buy a car.") for i in range(6)]
CASES_DE = [(f"c{i}", f"Ich beantrage einen Kredit über {1000 + 250 * i} EUR.") for i in range(6)]


def _raw(language: str) -> bytes:
    return resources.files("decflow.catalogue").joinpath(f"{language}.json").read_bytes()


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in [key, *_strings(value)]]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


@pytest.mark.parametrize("language", ["en", "de"])
def test_catalogue_is_versioned_hashed_nfc_and_documented(language: str) -> None:
    raw = _raw(language)
    doc = json.loads(raw)
    cat = load_catalogue(language)
    assert cat.sha256 == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert cat.version == doc["version"]
    assert all(unicodedata.normalize("NFC", s) == s for s in _strings(doc))
    for section in ("genders", "ethnicity", "religion", "role"):
        assert doc[section]["provenance"].strip()
    for group, spec in doc["ethnicity"]["groups"].items():
        assert spec["provenance"].strip(), group
        assert len(spec["last"]) >= 3
        for gender in GENDERS:
            assert len(spec["first"][gender]) >= 3, (group, gender)
    # Religion only through a clause naming the place of worship, with a secular control of
    # comparable length.
    lengths = [len(place) for place in cat.places.values()]
    assert max(lengths) <= 2 * min(lengths)
    assert any(spec.get("control") for spec in doc["religion"]["groups"].values())


def test_places_of_worship_are_named_in_both_languages() -> None:
    en = " ".join(load_catalogue("en").places.values())
    de = " ".join(load_catalogue("de").places.values())
    for word in ("mosque", "church", "synagogue", "temple", "gurdwara"):
        assert word in en
    for word in ("Moschee", "Kirche", "Synagoge", "Tempel", "Gurdwara"):
        assert word in de


def test_german_catalogue_carries_grammatical_gender() -> None:
    cat = load_catalogue("de")
    female, male = cat.genders["female"], cat.genders["male"]
    assert (female["pronoun_subject"], male["pronoun_subject"]) == ("sie", "er")
    assert (female["pronoun_object"], male["pronoun_object"]) == ("sie", "ihn")
    assert (female["pronoun_dative"], male["pronoun_dative"]) == ("ihr", "ihm")
    assert (female["article_definite"], male["article_definite"]) == ("die", "der")
    assert female["applicant"] != male["applicant"]
    for tier in cat.occupations.values():
        for forms in tier:
            assert forms["female"] != forms["male"]
    assert "article_indefinite" in cat.slot_names
    assert unknown_slots("{article_definite} {applicant}", cat) == []
    assert unknown_slots("{article_definite}", load_catalogue("en")) == ["article_definite"]


@pytest.mark.parametrize(("language", "cases"), [("en", CASES_EN), ("de", CASES_DE)])
def test_catalogue_pairs_are_single_axis_with_placebo_partners(language, cases) -> None:
    pairs = build_pairs(cases, language=language)
    assert pairs.not_exercised == {}
    assert pairs.catalogue_sha256 == load_catalogue(language).sha256
    by_kind: dict[tuple[str, str], int] = {}
    for p in pairs.pairs:
        by_kind[(p.axis, p.kind)] = by_kind.get((p.axis, p.kind), 0) + 1
        assert p.status == "ok", p
        assert p.pair_id.startswith(f"{p.axis}/{p.case_id}/")
        if p.kind == "cross":
            assert p.group_a != p.group_b
        else:
            assert p.group_a == p.group_b
            assert p.entry_a != p.entry_b
        owned = load_catalogue(language).owned_slots(p.axis)
        if p.axis != "gender":  # gender may also re-inflect agreeing forms
            assert set(p.changed) <= owned
    for axis in AXES:
        assert by_kind[(axis, "cross")] == 4 * len(cases)
        assert by_kind[(axis, "placebo")] >= 3 * len(cases)


def test_default_template_is_a_preamble_before_plain_text() -> None:
    pair = build_pairs(CASES_EN[:1], dimensions=["religion"]).pairs[0]
    assert isinstance(pair.input_a, str)
    head, text = pair.input_a.split("\n\n")
    assert text == CASES_EN[0][1]
    assert head.startswith("Applicant: ")
    de = build_pairs(CASES_DE[:1], language="de", dimensions=["gender"]).pairs[0]
    assert {de.input_a.split(":")[0], de.input_b.split(":")[0]} == {
        "Antragstellerin",
        "Antragsteller",
    }


def test_gender_pairs_reinflect_agreement_in_german() -> None:
    pairs = build_pairs(CASES_DE, language="de", dimensions=["gender"]).pairs
    cross = [p for p in pairs if p.kind == "cross"]
    assert cross
    for p in cross:
        female, male = (p.input_a, p.input_b) if p.group_a == "female" else (p.input_b, p.input_a)
        assert female.startswith("Antragstellerin:")
        assert "Sie " in female or " sie " in female
        assert male.startswith("Antragsteller:")
        assert "Er " in male or " er " in male


def test_pairs_are_reproducible_and_case_local() -> None:
    first = build_pairs(CASES_EN)
    again = build_pairs(CASES_EN)
    assert first.pairs == again.pairs
    # Adding a case does not change the pairs of the others.
    more = build_pairs([*CASES_EN, ("extra", "Another request.")])
    assert [p for p in more.pairs if p.case_id != "extra"] == first.pairs
    other_seed = build_pairs(CASES_EN, catalog_seed=7)
    assert other_seed.pools != first.pools


def test_pairs_do_not_depend_on_python_hash_randomisation() -> None:
    script = (
        "from decflow.diagnostics.personas import build_pairs;"
        "print([p.fingerprint_b for p in build_pairs([('c', 'x')]).pairs])"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_slots_in_the_text_are_filled_and_missing_axes_are_identical() -> None:
    cases = [("c1", "{full_name} asks for a loan; {pronoun_subject} earns 3000 EUR.")]
    pairs = build_pairs(cases)
    statuses = {(p.axis, p.kind): p.status for p in pairs.pairs}
    assert statuses[("gender", "cross")] == "ok"
    assert statuses[("ethnicity", "cross")] == "ok"
    assert statuses[("religion", "cross")] == "identical"
    assert statuses[("role", "cross")] == "identical"
    for p in pairs.pairs:
        assert "{" not in str(p.input_a)
        assert "Applicant" not in str(p.input_a)


def test_capitalised_slot_forms_start_sentences() -> None:
    pairs = build_pairs([("c", "{pronoun_subject_cap} needs a loan.")], dimensions=["gender"])
    texts = {p.input_a for p in pairs.pairs} | {p.input_b for p in pairs.pairs}
    assert texts == {"She needs a loan.", "He needs a loan."}


def test_braces_that_are_not_slots_are_left_alone() -> None:
    text = 'Data: {"amount": 5} and {unknown}'
    pair = build_pairs([("c", text)], dimensions=["role"]).pairs[0]
    assert isinstance(pair.input_a, str)
    assert pair.input_a.endswith("\n\n" + text)


def test_object_inputs_use_the_text_field() -> None:
    cases = [("c1", {"text": "Loan of 500 EUR.", "amount": 500}), ("c2", {"amount": 3})]
    pairs = build_pairs(cases, text_field="text", dimensions=["role"])
    assert pairs.skipped == [
        {"case_id": "c2", "reason": "input field 'text' is missing or not a string"}
    ]
    pair = pairs.pairs[0]
    assert isinstance(pair.input_a, dict)
    assert pair.input_a["amount"] == 500
    assert pair.input_a["text"].endswith("\n\nLoan of 500 EUR.")
    no_field = build_pairs(cases[:1], dimensions=["role"])
    assert "fuzz.text_field" in no_field.skipped[0]["reason"]
    assert no_field.pairs == []


def test_a_pool_of_one_entry_exercises_nothing() -> None:
    pairs = build_pairs(CASES_EN, pool_size_per_dimension=1)
    assert set(pairs.not_exercised) == set(AXES)
    assert pairs.pairs == []
    assert all("pool_size_per_dimension" in reason for reason in pairs.not_exercised.values())


def test_fewer_pairs_than_requested_when_the_catalogue_runs_out() -> None:
    # Two role entries in the pool at most give one contrast.
    pairs = build_pairs(CASES_EN[:1], dimensions=["role"], num_pairs_per_dimension=16)
    cross = [p for p in pairs.pairs if p.kind == "cross"]
    assert 1 <= len(cross) <= 16
    assert len({(p.entry_a, p.entry_b) for p in cross}) == len(cross)


def test_persona_pairs_override_is_diff_checked() -> None:
    template_text = [("c1", "{first_name} works as {occupation}; {pronoun_subject} wants a loan.")]
    good = {
        "axis": "gender",
        "a": {"first_name": "Anna", "pronoun_subject": "she"},
        "b": {"first_name": "Ben", "pronoun_subject": "he"},
    }
    leaky = {
        "axis": "gender",
        "a": {"first_name": "Anna", "occupation": "nurse"},
        "b": {"first_name": "Ben", "occupation": "welder"},
    }
    pairs = build_pairs(template_text, persona_pairs=[good, leaky])
    statuses = [(p.axis, p.kind, p.status, p.group_a, p.group_b) for p in pairs.pairs]
    assert statuses == [
        ("gender", "cross", "ok", "a", "b"),
        ("gender", "cross", "multi-axis", "a", "b"),
    ]
    first = pairs.pairs[0]
    assert str(first.input_a).startswith("Anna works as ")
    assert str(first.input_a).endswith("; she wants a loan.")
    assert str(first.input_b).startswith("Ben works as ")
    assert first.changed == ("first_name", "pronoun_subject")
    assert set(pairs.not_exercised) == {"ethnicity", "religion", "role"}
    with pytest.raises(ConfigurationError, match=r"persona_pairs\[0\].*unknown persona slots"):
        build_pairs(
            template_text, persona_pairs=[{"axis": "role", "a": {"job": "x"}, "b": {"job": "y"}}]
        )


def test_pair_frame_has_one_row_per_pair() -> None:
    pairs = build_pairs(CASES_EN[:2])
    frame = pairs.frame()
    assert frame.height == len(pairs.pairs)
    assert frame["pair_id"].to_list() == [p.pair_id for p in pairs.pairs]
    assert json.loads(frame["input_a"][0]) == pairs.pairs[0].input_a


def test_template_with_a_slot_the_language_lacks_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"counterfactual\.template.*article_definite"):
        build_pairs(CASES_EN[:1], template="{article_definite} {full_name}")
    pairs = build_pairs(CASES_DE[:1], language="de", template="{article_definite} {full_name}")
    assert {str(p.input_a).split(" ")[0] for p in pairs.pairs} <= {"die", "der"}


def test_stored_pair_table_reads_back_the_same_pairs() -> None:
    from decflow.diagnostics.pair_storage import pair_meta, pair_table, pairs_from

    built = build_pairs([*CASES_EN[:3], ("obj", {"text": "Need a loan", "amount": 3})])
    built.skipped.append({"case_id": "odd", "reason": "no text field"})
    again = pairs_from(pair_table(built), pair_meta(built))
    assert again == built
    assert again.pairs and again.bases
    assert [item["case_id"] for item in again.skipped] == ["obj", "odd"]
