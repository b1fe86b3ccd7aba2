"""The report's per-case results and failures, built by columns, are what each case's
stored rows say: answered and errored cases, missing expected labels, cache hits, JSON
inputs and metadata, ties, tiny and huge probabilities, unicode ids; and the confidence
histogram counts the decided cases per bin."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

from decflow.backends.results_schema import RESULTS_SCHEMA
from decflow.contracts import parse_contract
from decflow.pipeline.contract_run.golden_section import (
    golden_cases,
    originals,
    plain_numbers,
)
from decflow.report.sections import confidence_histogram
from decflow.store.store import json_bytes
from tests.support.contracts import example

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


def test_case_results_made_ahead_are_filled_in_to_the_same_report(tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import (
        case_results,
        prepare_case_results,
        prepared_case_results,
    )
    from decflow.store.store import open_store

    store = open_store(str(tmp_path / "store"))
    table = _table(CASES, RESULTS)
    cases = store.publish("cases", "k", table.select(
        "case_id", "input_text", "input_json", "expected", "metadata_json", "position"))
    prepare_case_results(store, cases)
    made = prepared_case_results(cases)
    assert made is not None and prepared_case_results(cases) is None  # taken once
    assert [c["result"] for c in made] == [None] * len(CASES)
    results, failures = golden_cases(_contract(), table, BACKEND, made)
    assert all(r is m for r, m in zip(results, made, strict=True))  # filled in, not copied
    assert results == EXPECTED_RESULTS and failures == EXPECTED_FAILURES
    assert [list(r) for r in results] == [list(r) for r in EXPECTED_RESULTS]
    # made for other cases (another number of them): the table's own are made instead
    other = case_results(table.head(2))
    assert golden_cases(_contract(), table, BACKEND, other)[0] == EXPECTED_RESULTS


def test_answers_made_ahead_chunk_by_chunk_give_the_same_report(tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import prepare_answers, prepared_answers
    from decflow.store.store import open_store

    store = open_store(str(tmp_path / "store"))
    contract = _contract()
    columns = ("request_id", "probabilities", "selected", "confidence", "latency_ms",
               "error_kind", "error_message", "model", "model_version", "metadata_json",
               "cache_entry")
    # two chunks as the results stage stores them (RESULTS' rows in the stored columns)
    frames = [pl.DataFrame(rows, orient="row", schema={c: RESULTS_SCHEMA[c] for c in columns})
              .select(RESULTS_SCHEMA.names()) for rows in (RESULTS[:2], RESULTS[2:])]
    parts = [store.write_part(f"stages/results/k/chunk-o000000-a-{i:05d}.parquet", frame)
             for i, frame in enumerate(frames)]
    results = store.publish("results", "k", [], parts=parts)

    def made_ahead(backend: dict[str, Any]) -> dict[str, Any] | None:
        for part, frame in zip(parts, frames, strict=True):
            prepare_answers(contract, backend, part, frame)
        return prepared_answers(contract, BACKEND, results, None)

    answers = made_ahead(BACKEND)
    assert answers is not None and prepared_answers(contract, BACKEND, results, None) is None
    assert answers["c4"] is None  # the error's result
    assert answers["c3"] == {**_result("c3", [0.5, 0.5, 0.0], "refund", 0.5, 3.25, "m", "v1",
                                        {}), "cache_entry": "pack-7"}
    table = _table(CASES, RESULTS)
    made, failures = golden_cases(contract, table, BACKEND, answers=answers)
    assert made == EXPECTED_RESULTS and failures == EXPECTED_FAILURES
    assert all(r["result"] is answers[r["case_id"]] for r in made)  # taken, not made again
    assert [list(r["result"]) for r in made if r["result"]] == [
        list(r["result"]) for r in EXPECTED_RESULTS if r["result"]]
    assert json_bytes({"results": made}, per_case=("results",)) == json_bytes(
        {"results": EXPECTED_RESULTS}, per_case=("results",))
    # made for another backend: none are taken
    assert made_ahead({"name": "default", "provider": "openai"}) is None
    # not for every part: the others' are made of their rows held, if they are
    prepare_answers(contract, BACKEND, parts[0], frames[0])
    assert prepared_answers(contract, BACKEND, results, None) is None
    held = {parts[1].path: (parts[1].sha256, frames[1])}
    prepare_answers(contract, BACKEND, parts[0], frames[0])
    first = prepared_answers(contract, BACKEND, results, held)
    assert first == answers and first is not None and first["c5"] is not answers["c5"]
    prepare_answers(contract, BACKEND, parts[0], frames[0])
    assert prepared_answers(contract, BACKEND, results, {
        parts[1].path: ("another sha256", frames[1])}) is None



def _json_ahead(store: Any, cases: list[tuple[Any, ...]], chunks: list[list[tuple[Any, ...]]],
                handed: int) -> list[dict[str, Any]]:
    """The report's per-case results of `cases`, their text written ahead by `CaseJson`:
    the result rows are stored in `chunks`, the first `handed` of them handed over as a
    remote run's are, the others left to the summary (their rows held)."""
    from decflow.pipeline.contract_run.golden_section import (
        prepare_answers,
        prepare_case_results,
        prepared_answers,
        prepared_case_results,
    )

    contract = _contract()
    table = _table(cases, [row for chunk in chunks for row in chunk])
    cases_manifest = store.publish("cases", "k", table.select(
        "case_id", "input_text", "input_json", "expected", "metadata_json", "position"))
    columns = ("request_id", "probabilities", "selected", "confidence", "latency_ms",
               "error_kind", "error_message", "model", "model_version", "metadata_json",
               "cache_entry")
    prepare_case_results(store, cases_manifest, with_json=True)
    parts, held = [], {}
    for i, chunk in enumerate(chunks):
        frame = pl.DataFrame(chunk, orient="row", schema={c: RESULTS_SCHEMA[c] for c in columns}
                             ).select(RESULTS_SCHEMA.names())
        parts.append(store.write_part(f"stages/results/k/chunk-o000000-a-{i:05d}.parquet",
                                      frame))
        held[parts[-1].path] = (parts[-1].sha256, frame)
        if i < handed:
            prepare_answers(contract, BACKEND, parts[-1], frame)
    results = store.publish("results", "k", [], parts=parts)
    return golden_cases(contract, table, BACKEND, prepared_case_results(cases_manifest),
                        prepared_answers(contract, BACKEND, results, held))[0]


def _report_text(results: list[dict[str, Any]], written: Any) -> bytes:
    from decflow.store.store import json_pieces

    return b"".join(bytes(piece) for piece in json_pieces(
        {"status": "PASS", "results": results, "run": {}}, per_case=("results",),
        written=None if written is None else {"results": written}))


ROWS = {row[0]: row for row in RESULTS}
# answers out of the cases' order: the first chunk begins no run of cases, the second makes
# the first three one, the last (an error) the rest
CHUNKS = [[ROWS["c6"], ROWS["c3"]], [ROWS["c-é“1”"], ROWS["c2"]], [ROWS["c4"]]]


@pytest.mark.parametrize(("handed", "written_ahead"), [(3, 5), (2, 3)])
def test_case_json_written_ahead_is_the_reports_own_text(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, handed: int, written_ahead: int) -> None:
    from decflow.pipeline.contract_run.golden_section import CaseJson, written_case_json
    from decflow.store.store import open_store

    monkeypatch.setattr(CaseJson, "BLOCK", 2)
    cases = [c for c in CASES if c[0] != "c5"]  # (its tiny floats: see below)
    expected = [r for r in EXPECTED_RESULTS if r["case_id"] != "c5"]
    made = _json_ahead(open_store(str(tmp_path / "store")), cases, CHUNKS, handed)
    written = written_case_json(made)
    assert made == expected and written is not None and written[0] is made
    assert written[1] == written_ahead  # the rest: written by the summary
    assert _report_text(made, written) == _report_text(expected, None) == json_bytes(
        {"status": "PASS", "results": expected, "run": {}}, per_case=("results",))
    assert written_case_json(made) is None  # taken once


def test_case_json_is_not_used_for_cases_changed_since_or_that_orjson_spells_otherwise(
        tmp_path: Any) -> None:
    from decflow.pipeline.contract_run.golden_section import written_case_json
    from decflow.store.store import open_store

    cases = [c for c in CASES if c[0] != "c5"]
    made = _json_ahead(open_store(str(tmp_path / "a")), cases, CHUNKS, 3)
    made[1]["result"] = dict(made[1]["result"])  # an equal copy: not the result written
    assert written_case_json(made) is None
    made = _json_ahead(open_store(str(tmp_path / "b")), cases, CHUNKS, 3)
    made[3]["error"] = {"kind": "timeout", "message": "another"}
    assert written_case_json(made) is None
    made = _json_ahead(open_store(str(tmp_path / "c")), cases, CHUNKS, 3)
    assert written_case_json(list(made)) is None  # not the list it was made of
    # c5's 1e-300 and 2.5e-07: orjson writes them otherwise, so no text is kept
    made = _json_ahead(open_store(str(tmp_path / "d")), CASES, [*CHUNKS, [ROWS["c5"]]], 4)
    assert made == EXPECTED_RESULTS and written_case_json(made) is None
