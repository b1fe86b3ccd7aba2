"""The report's per-case results and failures, built by columns, are what each case's
stored rows say: answered and errored cases, missing expected labels, cache hits, JSON
inputs and metadata, ties, tiny and huge probabilities, unicode ids; and the confidence
histogram counts the decided cases per bin."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import polars as pl
import pytest

from decflow.backends.engine import RESULTS_SCHEMA
from decflow.contracts import parse_contract
from decflow.pipeline.contract_run.golden_section import (
    golden_cases,
    originals,
    plain_numbers,
)
from decflow.report.sections import confidence_histogram
from decflow.store.store import json_bytes, json_pieces
from tests.support.contracts import edited, example

LABELS = ["refund", "reject", "review"]
BACKEND = {"name": "default", "provider": "http"}

# (case_id, input_text, input_json, expected, metadata_json)
CASES = [
    ("c-é“1”", "Broken on arrival.", None, "refund", None),
    ("c2", None, '{"text":"Où est ma commande ?","order":[1,2.5]}', "reject", '{"tier":"gold"}'),
    ("c3", "tie", None, None, "{}"),
    ("c4", "timed out", None, "review", None),
    ("c5", "tiny", None, "review", None),
    ("c6", None, None, "refund", None),
]
# (request_id, probabilities, selected, confidence, latency_ms, error_kind, error_message,
#  model, model_version, metadata_json, cache_entry), in another order than the cases
RESULTS = [
    ("c5", [1e-300, 2.5e-07, 1.0], "review", 1.0, 1e16, None, None, "m", None, None, None),
    ("c4", None, None, None, None, "timeout", "no answer in 30 s", None, None, None, None),
    ("c3", [0.5, 0.5, 0.0], "refund", 0.5, 3.25, None, None, "m", "v1", "{}", "pack-7"),
    ("c-é“1”", [0.7, 0.2, 0.1], "refund", 0.7, 12.5, None, None, "m", None,
     '{"tokens": 3}', None),
    ("c2", [0.1, 0.3, 0.6], "review", 0.6, 20.0, None, None, None, None, None, None),
    ("c6", [0.2, 0.5, 0.3], "reject", 0.5, 1.0, None, None, "m", None, None, "pack-8"),
]


def _result(case_id: str, probabilities: list[float], selected: str, confidence: float,
            latency: float, model: str | None, version: str | None,
            metadata: dict[str, Any]) -> dict[str, Any]:
    return {"case_id": case_id, "decision": "refund_request", "decision_type": "choice",
            "labels": LABELS, "probabilities": dict(zip(LABELS, probabilities, strict=True)),
            "selected": selected, "confidence": confidence, "backend": "default",
            "provider": "http", "model": model, "model_version": version,
            "latency_ms": latency, "metadata": metadata}


EXPECTED_RESULTS = [
    {"case_id": "c-é“1”", "input": "Broken on arrival.", "expected": "refund", "metadata": {},
     "result": _result("c-é“1”", [0.7, 0.2, 0.1], "refund", 0.7, 12.5, "m", None,
                       {"tokens": 3}), "error": None},
    {"case_id": "c2", "input": {"text": "Où est ma commande ?", "order": [1, 2.5]},
     "expected": "reject", "metadata": {"tier": "gold"},
     "result": _result("c2", [0.1, 0.3, 0.6], "review", 0.6, 20.0, None, None, {}),
     "error": None},
    {"case_id": "c3", "input": "tie", "expected": None, "metadata": {},
     "result": {**_result("c3", [0.5, 0.5, 0.0], "refund", 0.5, 3.25, "m", "v1", {}),
                "cache_entry": "pack-7"}, "error": None},
    {"case_id": "c4", "input": "timed out", "expected": "review", "metadata": {},
     "result": None, "error": {"kind": "timeout", "message": "no answer in 30 s"}},
    {"case_id": "c5", "input": "tiny", "expected": "review", "metadata": {},
     "result": _result("c5", [1e-300, 2.5e-07, 1.0], "review", 1.0, 1e16, "m", None, {}),
     "error": None},
    {"case_id": "c6", "input": "", "expected": "refund", "metadata": {},
     "result": {**_result("c6", [0.2, 0.5, 0.3], "reject", 0.5, 1.0, "m", None, {}),
                "cache_entry": "pack-8"}, "error": None},
]
EXPECTED_FAILURES = [
    {"case_id": "c2", "kind": "mismatch", "input": {"text": "Où est ma commande ?",
                                                     "order": [1, 2.5]},
     "expected": "reject", "selected": "review", "confidence": 0.6, "error": None},
    {"case_id": "c4", "kind": "error", "input": "timed out", "expected": "review",
     "selected": None, "confidence": None, "error": "timeout: no answer in 30 s"},
    {"case_id": "c6", "kind": "mismatch", "input": "", "expected": "refund",
     "selected": "reject", "confidence": 0.5, "error": None, "cache_entry": "pack-8"},
]


def _table(cases: list[tuple[Any, ...]], results: list[tuple[Any, ...]]) -> pl.DataFrame:
    case_frame = pl.DataFrame(
        [(*case, position) for position, case in enumerate(cases)], orient="row",
        schema={"case_id": pl.String, "input_text": pl.String, "input_json": pl.String,
                "expected": pl.String, "metadata_json": pl.String, "position": pl.Int64})
    result_frame = pl.DataFrame(results, orient="row", schema={
        name: RESULTS_SCHEMA[name] for name in (
            "request_id", "probabilities", "selected", "confidence", "latency_ms",
            "error_kind", "error_message", "model", "model_version", "metadata_json",
            "cache_entry")})
    return originals(case_frame, result_frame)


def _contract() -> Any:
    return parse_contract(example("refund"), "refund.yaml")


def test_per_case_results_and_failures_are_what_the_stored_rows_say() -> None:
    results, failures = golden_cases(_contract(), _table(CASES, RESULTS), BACKEND)
    assert results == EXPECTED_RESULTS
    assert [list(r) for r in results] == [list(r) for r in EXPECTED_RESULTS]  # key order
    assert [list(r["result"]) for r in results if r["result"]] == [
        list(r["result"]) for r in EXPECTED_RESULTS if r["result"]]
    assert failures == EXPECTED_FAILURES
    assert [list(f) for f in failures] == [list(f) for f in EXPECTED_FAILURES]
    written = json_bytes({"results": results, "failures": failures},
                         per_case=("results", "failures"))
    assert written == (json.dumps({"results": EXPECTED_RESULTS, "failures": EXPECTED_FAILURES},
                                  ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def test_cases_without_errors_or_cache_column_are_all_results() -> None:
    answered = [row for row in RESULTS if row[5] is None]
    table = _table([c for c in CASES if c[0] != "c4"], answered).drop("cache_entry")
    results, failures = golden_cases(_contract(), table, BACKEND)
    assert [r["result"]["selected"] for r in results] == ["refund", "review", "refund",
                                                            "review", "reject"]
    assert all("cache_entry" not in r["result"] for r in results)
    assert [f["case_id"] for f in failures] == ["c2", "c6"]


def test_an_answer_with_the_wrong_number_of_probabilities_is_refused() -> None:
    rows = [(CASES[0][0], [0.5, 0.5], "refund", 0.5, 1.0, None, None, None, None, None, None)]
    with pytest.raises(ValueError):
        golden_cases(_contract(), _table(CASES[:1], rows), BACKEND)


def test_nan_in_stored_metadata_still_stops_the_report() -> None:
    rows = [(CASES[0][0], [0.5, 0.25, 0.25], "refund", 0.5, 1.0, None, None, None, None,
             '{"score": NaN}', None)]
    with pytest.raises(ValueError, match="not JSON compliant: NaN"):
        golden_cases(_contract(), _table(CASES[:1], rows), BACKEND)


TEXT_CASES = [(case_id, text or "x", None, expected, None)
              for case_id, text, _json, expected, _metadata in CASES]


def _answers(probabilities: list[float], latency: float) -> list[tuple[Any, ...]]:
    return [(case_id, probabilities, "review", max(probabilities), latency, None, None, "m",
             None, None, None) for case_id, *_rest in CASES]


@pytest.mark.parametrize(("cases", "answers", "plain"), [
    (TEXT_CASES, _answers([0.25, 0.25, 0.5], 1e16), True),
    (TEXT_CASES, _answers([0.0, -0.0, 1.0], 0.0001), True),
    (TEXT_CASES, _answers([0.00005, 0.49995, 0.5], 3.0), False),  # spelled 5e-05
    (TEXT_CASES, _answers([0.25, 0.25, 0.5], 2.5e-07), False),
    (CASES, _answers([0.25, 0.25, 0.5], 3.0), False),  # JSON inputs, metadata: any number
    (TEXT_CASES, RESULTS, False),  # answers' metadata
])
def test_plain_numbers_are_written_without_a_scan_to_the_same_bytes(
        cases: list[tuple[Any, ...]], answers: list[tuple[Any, ...]], plain: bool) -> None:
    table = _table(cases, answers)
    assert plain_numbers(table) is plain
    results, failures = golden_cases(_contract(), table, BACKEND)
    report = {"results": results, "failures": failures}
    expected = (json.dumps(report, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    assert json_bytes(report, per_case=("results", "failures"), plain=plain) == expected


@pytest.mark.parametrize(("confidences", "expected"), [
    ([0.0, 0.1, 0.25, 0.26, 0.5, 0.51, 1.0], [3, 2, 2]),  # an edge goes to its own bin
    ([1.5, -0.2, float("nan")], [2, 0, 1]),  # beyond the edges: the last bin; NaN: the first
    ([], [0, 0, 0]),
])
def test_confidence_histogram_counts_decided_cases_per_bin(
        confidences: list[float], expected: list[int]) -> None:
    bins = [{"lower": 0.0, "upper": 0.25}, {"lower": 0.25, "upper": 0.5},
            {"lower": 0.5, "upper": 1.0}]
    results = [{"result": {"confidence": c}} for c in confidences]
    results.append({"result": None, "error": {"kind": "timeout"}})
    assert confidence_histogram(bins, results) == expected


def test_expected_labels_are_indexed_with_unlabeled_and_unknown_ones_minus_one() -> None:
    from decflow.pipeline.contract_run.golden_section import golden_arrays

    cases = [(f"c{i}", "x", None, expected, None)
             for i, expected in enumerate(["review", None, "refund", "Refund", "reject"])]
    answers = [(case[0], [0.2, 0.3, 0.5], "review", 0.5, 1.0, None, None, None, None, None,
                None) for case in cases]
    arrays = golden_arrays(_table(cases, answers), tuple(LABELS))
    assert arrays["expected_index"].tolist() == [2, -1, 0, -1, 1]
    no_labels = _table(cases, answers).with_columns(expected=pl.lit(None))
    assert golden_arrays(no_labels, tuple(LABELS))["expected_index"].tolist() == [-1] * 5


def _stored(tmp_path: Any) -> tuple[Any, Any, list[Any], list[pl.DataFrame], Any]:
    """(store, cases manifest, result chunks, their rows, results manifest): CASES and
    RESULTS as a run stores them, the results in two chunks."""
    from decflow.store.store import open_store

    store = open_store(str(tmp_path / "store"))
    cases = store.publish("cases", "k", _table(CASES, RESULTS).select(
        "case_id", "input_text", "input_json", "expected", "metadata_json", "position"))
    columns = ("request_id", "probabilities", "selected", "confidence", "latency_ms",
               "error_kind", "error_message", "model", "model_version", "metadata_json",
               "cache_entry")
    frames = [pl.DataFrame(rows, orient="row", schema={c: RESULTS_SCHEMA[c] for c in columns})
              .select(RESULTS_SCHEMA.names()) for rows in (RESULTS[:2], RESULTS[2:])]
    parts = [store.write_part(f"stages/results/k/chunk-o000000-a-{i:05d}.parquet", frame)
             for i, frame in enumerate(frames)]
    return store, cases, parts, frames, store.publish("results", "k", [], parts=parts)


def test_case_results_made_ahead_are_filled_in_to_the_same_report(tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import (
        case_results,
        prepare_case_results,
        prepared_case_results,
    )
    from decflow.pipeline.made_ahead import MadeAhead

    store, cases, _parts, _frames, _results = _stored(tmp_path)
    made = MadeAhead()
    prepare_case_results(store, cases, made)
    prepared = prepared_case_results(cases, made)
    assert prepared is not None and prepared_case_results(cases, made) is None  # taken once
    assert [c["result"] for c in prepared.items] == [None] * len(CASES)
    table = _table(CASES, RESULTS)
    results, failures = golden_cases(_contract(), table, BACKEND, prepared.items)
    assert all(r is m for r, m in zip(results, prepared.items, strict=True))  # filled in
    assert results == EXPECTED_RESULTS and failures == EXPECTED_FAILURES
    assert [list(r) for r in results] == [list(r) for r in EXPECTED_RESULTS]
    # made for other cases (another number of them): the table's own are made instead
    other = case_results(table.head(2))
    assert golden_cases(_contract(), table, BACKEND, other)[0] == EXPECTED_RESULTS


@pytest.mark.parametrize("plain", [True, False])
def test_answers_and_json_made_ahead_chunk_by_chunk_give_the_same_report(
        tmp_path: Any, plain: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    from decflow.pipeline.contract_run import golden_section
    from decflow.pipeline.contract_run.golden_section import (
        prepare_answers,
        prepare_case_results,
        prepared_answers,
        prepared_case_results,
        results_json,
    )
    from decflow.pipeline.made_ahead import MadeAhead

    monkeypatch.setattr(golden_section, "JSON_PIECE_CASES", 4)  # in pieces of 4 cases
    store, cases, parts, frames, results = _stored(tmp_path)
    contract, made = _contract(), MadeAhead()
    written = prepare_case_results(store, cases, made)
    for part, frame in zip(parts, frames, strict=True):
        prepare_answers(contract, BACKEND, part, frame, made, written)
    # each answered case written as the report's writer spells it; the error is not
    assert [w is not None for w in written.written] == [True, True, True, False, True, True]
    prepared = prepared_case_results(cases, made)
    answers = prepared_answers(contract, BACKEND, results, None, made)
    assert prepared is written and answers is not None
    assert prepared_answers(contract, BACKEND, results, None, made) is None  # taken once
    assert answers["c4"] is None  # the error's result
    assert answers["c3"] == {**_result("c3", [0.5, 0.5, 0.0], "refund", 0.5, 3.25, "m", "v1",
                                        {}), "cache_entry": "pack-7"}
    table = _table(CASES, RESULTS)
    found, failures = golden_cases(contract, table, BACKEND, prepared.items, answers)
    assert found == EXPECTED_RESULTS and failures == EXPECTED_FAILURES
    assert all(r["result"] is answers[r["case_id"]] for r in found)  # taken, not made again
    assert [list(r["result"]) for r in found if r["result"]] == [
        list(r["result"]) for r in EXPECTED_RESULTS if r["result"]]
    made_json = results_json(prepared, found)
    assert made_json is not None and b"".join(made_json) == orjson.dumps(EXPECTED_RESULTS)
    assert len(made_json) == 5  # [, the first 4 cases, a comma, the last 2, ]
    assert b"".join(json_pieces({"results": found}, per_case=("results",), plain=plain, written={
        "results": (found, made_json)})) == json_bytes(
        {"results": EXPECTED_RESULTS}, per_case=("results",), plain=plain)
    # a case changed after it was written is written again; another list: none are taken
    for at in (0, -1):
        found[at]["result"] = {**found[at]["result"], "selected": "review"}
    assert b"".join(results_json(prepared, found) or []) == orjson.dumps(found)
    assert results_json(prepared, list(found)) is None


def test_answers_made_ahead_of_some_chunks_are_completed_from_the_held_rows(
        tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import prepare_answers, prepared_answers
    from decflow.pipeline.made_ahead import MadeAhead

    _store, _cases, parts, frames, results = _stored(tmp_path)
    contract = _contract()
    everything = MadeAhead()
    for part, frame in zip(parts, frames, strict=True):
        prepare_answers(contract, BACKEND, part, frame, everything)
    answers = prepared_answers(contract, BACKEND, results, None, everything)
    made = MadeAhead()
    prepare_answers(contract, BACKEND, parts[0], frames[0], made)
    assert prepared_answers(contract, BACKEND, results, None, made) is None  # not held
    held = {parts[1].path: (parts[1].sha256, frames[1])}
    prepare_answers(contract, BACKEND, parts[0], frames[0], made)
    first = prepared_answers(contract, BACKEND, results, held, made)
    assert first == answers and first is not None and answers is not None
    assert first["c5"] is not answers["c5"]
    prepare_answers(contract, BACKEND, parts[0], frames[0], made)
    assert prepared_answers(contract, BACKEND, results, {
        parts[1].path: ("another sha256", frames[1])}, made) is None


def test_what_was_made_ahead_for_another_run_backend_contract_or_cases_is_never_taken(
        tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import (
        prepare_answers,
        prepare_case_results,
        prepared_answers,
        prepared_case_results,
    )
    from decflow.pipeline.made_ahead import MadeAhead

    store, cases, parts, frames, results = _stored(tmp_path)
    contract = _contract()
    renamed = parse_contract(edited("refund", {"decision.name": "refund_triage"}),
                             "refund.yaml")
    other_cases = store.publish("cases", "k2", _table(CASES[:2], RESULTS).select(
        "case_id", "input_text", "input_json", "expected", "metadata_json", "position"))
    made, this_run = MadeAhead(), MadeAhead()
    prepare_case_results(store, cases, made)
    for part, frame in zip(parts, frames, strict=True):
        prepare_answers(contract, BACKEND, part, frame, made)
    # another run (its own MadeAhead), or none: nothing
    assert prepared_case_results(cases, this_run) is None
    assert prepared_answers(contract, BACKEND, results, None, this_run) is None
    assert prepared_case_results(cases, None) is None
    assert prepared_answers(contract, BACKEND, results, None, None) is None
    # another cases artifact, another backend, another provider, another contract: nothing
    assert prepared_case_results(other_cases, made) is None
    for backend in ({"name": "other", "provider": "http"},
                    {"name": "default", "provider": "openai"}):
        assert prepared_answers(contract, backend, results, None, made) is None
    assert prepared_answers(renamed, BACKEND, results, None, made) is None
    # other chunks (another sha256) of the same path: nothing
    moved = dataclasses.replace(results, parts=tuple(
        dataclasses.replace(part, sha256="0" * 64) for part in results.parts))
    assert prepared_answers(contract, BACKEND, moved, None, made) is None
    # still there for what it was made for, once
    assert prepared_case_results(cases, made) is not None
    assert prepared_answers(contract, BACKEND, results, None, made) is not None
    assert prepared_answers(contract, BACKEND, results, None, made) is None
