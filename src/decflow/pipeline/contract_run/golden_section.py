"""The golden part of a summary: per-case results, metrics, failures, golden checks.

Everything is computed from the stored `cases` and `results` tables, so a stored run can be
re-gated with an edited contract without calling the backend.
"""

from __future__ import annotations

import json
import mmap
import operator
import tempfile
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.contracts.gates import GOLDEN_GATES
from decflow.gates import golden_checks
from decflow.gates.calibration import smooth_ece_checks
from decflow.gates.checks import NO_ELIGIBLE_CASES
from decflow.metrics.calibration import calibration_section
from decflow.metrics.columns import probability_matrix
from decflow.metrics.golden_cases import CaseValues, gate_metrics
from decflow.metrics.golden_metrics import golden_metrics, selected_and_confidence
from decflow.metrics.smooth_ece import grids_of
from decflow.store.store import per_case_json

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.store.store import Manifest, Part, Store, WrittenItems

def originals(cases: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """Cases in dataset order joined with their original (unchanged) request's result.

    The case's metadata stays `metadata_json`; the backend's is `result_metadata_json`.
    """
    answers = results.rename({"metadata_json": "result_metadata_json"})
    return cases.join(answers, left_on="case_id", right_on="request_id", how="left",
                      maintain_order="left")


def golden_arrays(table: pl.DataFrame, labels: tuple[str, ...]) -> dict[str, Any]:
    return {
        "probabilities": probability_matrix(table["probabilities"], len(labels)),
        "errored": table["error_kind"].is_not_null().to_numpy(),
        # each case's expected label's index; -1: none, or not one of the labels
        "expected_index": table["expected"].cast(pl.String).replace_strict(
            list(labels), list(range(len(labels))), default=-1, return_dtype=pl.Int64,
        ).to_numpy(),
        "latency_ms": table["latency_ms"].fill_null(float("nan")).to_numpy(),
        "error_kinds": table["error_kind"].to_list(),
    }


def decision_result(
    row: dict[str, Any], contract: Contract, backend: dict[str, Any]
) -> dict[str, Any]:
    """The report's `result` of one answered case (`row` holds its `ANSWER_COLUMNS`, its
    `result_metadata_json` and, when served from the call cache, its `cache_entry`)."""
    [result] = decision_results(
        contract, backend, [[row[column]] for column in ANSWER_COLUMNS],
        [_json_object(row["result_metadata_json"])], [row.get("cache_entry")],
    )
    return result


# A case's answer as `decision_results` takes it, in this order.
ANSWER_COLUMNS = ("case_id", "probabilities", "selected", "confidence", "model", "model_version",
                  "latency_ms")
def decision_results(
    contract: Contract, backend: dict[str, Any], answers: Sequence[Sequence[Any]],
    metadata: Sequence[dict[str, Any]], served: Sequence[str | None],
) -> list[dict[str, Any]]:
    """The report's `result` of each answered case, from its columns: `answers` (one
    sequence per `ANSWER_COLUMNS`), the decoded metadata, the cache entry it was served
    from (None: asked). One comprehension over the columns, not a call per case: a run
    has tens of thousands."""
    decision = contract.decision
    name, kind, labels = decision.name, decision.type, tuple(decision.labels)
    backend_name, provider = backend["name"], backend["provider"]
    case_ids, probabilities, selected, confidence, model, version, latency = answers
    results = [
        {"case_id": case_id, "decision": name, "decision_type": kind, "labels": list(labels),
         "probabilities": dict(zip(labels, p, strict=True)), "selected": chosen,
         "confidence": c, "backend": backend_name, "provider": provider, "model": m,
         "model_version": v, "latency_ms": ms, "metadata": meta}
        for case_id, p, chosen, c, m, v, ms, meta in zip(
            case_ids, probabilities, selected, confidence, model, version, latency, metadata,
            strict=True)
    ]
    if len(served) != len(results):
        raise ValueError(f"{len(served)} cache entries for {len(results)} answers")
    if any(served):  # decflow: served from the call cache (absent: asked)
        for result, entry in zip(results, served, strict=True):
            if entry:
                result["cache_entry"] = entry
    return results


def _json_object(text: str | None) -> dict[str, Any]:
    """A stored object's JSON text read back (`{}` for none: most cases have no metadata)."""
    if not text or text == "{}":
        return {}
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def golden_summary(
    contract: Contract, arrays: dict[str, Any], *, with_gates: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, checks when gated) of the original cases (their `golden_arrays`)."""
    labels = tuple(contract.decision.labels)
    evaluation = contract.evaluation
    metrics = golden_metrics(
        labels=labels,
        decision_type=contract.decision.type,
        calibration_bins=evaluation.calibration_bins,
        confidence_threshold=evaluation.confidence_threshold,
        **arrays,
    )
    extensions = [gate for gate in GOLDEN_GATES.entries() if gate.metric_path is None
                  and gate.per_case is not None and any(
                      gates.limit(gate.name) is not None
                      for gates in (contract.requirements, contract.warnings))]
    if extensions:
        values = CaseValues.of(arrays, len(labels), evaluation.confidence_threshold,
                               evaluation.calibration_bins)
        metrics["extensions"] = gate_metrics(extensions, values)
    checks = (
        [c.to_dict() for c in golden_checks(
            metrics, contract.requirements, contract.warnings, contract.decision.type
        )]
        if with_gates
        else []
    )
    return metrics, checks


def calibration_summary(
    contract: Contract, arrays: dict[str, Any], metrics: dict[str, Any], *, with_gates: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the report's `calibration` section, `max_smooth_ece` checks when gated) over the
    labeled decided cases (their `golden_arrays`): top-label confidence against
    correctness."""
    labeled = ~arrays["errored"] & (arrays["expected_index"] >= 0)
    selected, confidence = selected_and_confidence(arrays["probabilities"][labeled])
    correct = (selected == arrays["expected_index"][labeled]).astype(np.float64)
    source = grids_of(confidence, correct)
    calibration = metrics["calibration"]
    limits = {level: limit for level, gates in
              (("requirement", contract.requirements), ("warning", contract.warnings))
              if (limit := gates.limit("max_ece")) is not None}
    section = calibration_section(calibration["reliability"], calibration["ece"], source,
                                  max_ece=limits, corp_of=(confidence, correct))
    checks = smooth_ece_checks(
        source, int(labeled.sum()),
        [("requirement", contract.requirements), ("warning", contract.warnings)],
        reason_if_empty=NO_ELIGIBLE_CASES,
    ) if with_gates else []
    return section, [c.to_dict() for c in checks]


# The keys of a failure, in the report's order (`cache_entry` follows when served).
FAILURE_KEYS = ("case_id", "kind", "input", "expected", "selected", "confidence", "error")


def golden_cases(
    contract: Contract, table: pl.DataFrame, backend: dict[str, Any],
    cases: list[dict[str, Any]] | None = None,
    answers: dict[str, dict[str, Any] | None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per-case results, failures) of the original cases, in dataset order.

    The report's largest part: `build_report` makes it last, after the sections that read
    the transformed requests, so the two are never in memory together. Built by columns
    (a run has tens of thousands of cases; a Python loop per case cost more than the rest
    of the summary): only the failing cases are visited one by one. `cases`: the
    `case_results` of the table's cases (`prepared_case_results`), filled in here;
    `answers`: their `answer_results` by case id (`prepared_answers`).
    """
    n = table.height
    errored = table["error_kind"].is_not_null()
    # runs stored before the call cache have no `cache_entry` column
    served = (table["cache_entry"].to_list() if "cache_entry" in table.columns
              else [None] * n)
    # (looked up by `map`, a C loop: 20k cases' results in ~4 ms, ~8 by a comprehension)
    results_of = (
        answer_results(contract, backend, table, "case_id", "result_metadata_json")
        if answers is None else list(map(answers.__getitem__, table["case_id"].to_list())))
    errors: list[dict[str, Any] | None] = [None] * n
    if errored.any():
        failed = table.filter(errored)
        for at, kind, message in zip(errored.arg_true().to_list(),
                                     failed["error_kind"].to_list(),
                                     failed["error_message"].to_list(), strict=True):
            errors[at] = {"kind": kind, "message": message}
    results = case_results(table) if cases is None or len(cases) != n else cases
    for case, result, error in zip(results, results_of, errors, strict=True):
        case["result"], case["error"] = result, error
    failing = errored | (table["expected"].is_not_null()
                         & table["selected"].ne_missing(table["expected"]))
    failures = [_failure(results[at], served[at]) for at in failing.arg_true().to_list()]
    return results, failures


def answer_results(
    contract: Contract, backend: dict[str, Any], answers: pl.DataFrame, case_id: str,
    metadata: str,
) -> list[dict[str, Any] | None]:
    """The report's `result` of each row of `answers` (None: an error), results' columns
    but the case id's and the backend metadata's (named `case_id`, `metadata`)."""
    errored = answers["error_kind"].is_not_null()
    # runs stored before the call cache have no `cache_entry` column
    served = (answers["cache_entry"].to_list() if "cache_entry" in answers.columns
              else [None] * answers.height)
    result_metadata = _json_objects(answers[metadata])
    answered_at = (~errored).arg_true().to_list() if errored.any() else None
    answered = answers.filter(~errored) if answered_at is not None else answers
    decided: list[dict[str, Any] | None] = list(decision_results(
        contract, backend,
        [answered[case_id if column == "case_id" else column].to_list()
         for column in ANSWER_COLUMNS],
        _pick(result_metadata, answered_at), _pick(served, answered_at)))
    if answered_at is None:
        return decided
    results_of: list[dict[str, Any] | None] = [None] * answers.height
    for at, result in zip(answered_at, decided, strict=True):
        results_of[at] = result
    return results_of


# Each result chunk's `answer_results` by request id, made as the chunk was written (by the
# chunk's path and sha256), with the decision and backend they name
_answers: dict[tuple[str, str], tuple[tuple[Any, ...], dict[str, dict[str, Any] | None]]] = {}


def _answers_of(contract: Contract, backend: dict[str, Any]) -> tuple[Any, ...]:
    decision = contract.decision
    return decision.name, decision.type, tuple(decision.labels), backend["name"], backend[
        "provider"]


def prepare_answers(
    contract: Contract, backend: dict[str, Any], chunk: Part, frame: pl.DataFrame
) -> None:
    """Make the `answer_results` of a result chunk of the originals just stored (its
    `frame`), for its summary to take (`prepared_answers`): a run does this while its
    backend is called (`decflow.commands.ahead`); with the cases' `CaseJson`, their
    per-case JSON too."""
    by_request = _by_request(contract, backend, frame)
    _answers[(chunk.path, chunk.sha256)] = (_answers_of(contract, backend), by_request)
    if _case_json is not None:
        _case_json.add(frame, by_request)


def _by_request(contract: Contract, backend: dict[str, Any],
                frame: pl.DataFrame) -> dict[str, dict[str, Any] | None]:
    made = answer_results(contract, backend, frame, "request_id", "metadata_json")
    return dict(zip(frame["request_id"].to_list(), made, strict=True))


def prepared_answers(
    contract: Contract, backend: dict[str, Any], results: Manifest,
    held: Mapping[str, tuple[str, pl.DataFrame]] | None,
) -> dict[str, dict[str, Any] | None] | None:
    """The `answer_results` of every part of `results` (the originals'), by request id:
    those made ahead for this decision and backend (all are taken: a second summary makes
    its own), the others' made now of their `held` rows (`Store.read`'s); None when none
    was made ahead or a part's rows are not held."""
    found = [_answers.pop((part.path, part.sha256), None) for part in results.parts]
    _answers.clear()
    wanted = _answers_of(contract, backend)
    if not any(made is not None and made[0] == wanted for made in found):
        return None
    merged: dict[str, dict[str, Any] | None] = {}
    for part, made in zip(results.parts, found, strict=True):
        if made is not None and made[0] == wanted:
            merged.update(made[1])
            continue
        rows = (held or {}).get(part.path)
        if rows is None or rows[0] != part.sha256:
            return None
        merged.update(_by_request(contract, backend, rows[1]))
    return merged


def case_results(cases: pl.DataFrame) -> list[dict[str, Any]]:
    """Each case's per-case result with what its case row says (`result` and `error` are
    None until `golden_cases` fills them in), in the rows' order."""
    return [
        {"case_id": case_id, "input": value, "expected": expected, "metadata": metadata,
         "result": None, "error": None}
        for case_id, value, expected, metadata in zip(
            cases["case_id"].to_list(), _case_inputs(cases), cases["expected"].to_list(),
            _json_objects(cases["metadata_json"]), strict=True)
    ]


# `case_results` of a cases artifact made ahead of its summary, by the artifact's sha256
# (one at a time; taken once: its dicts become the report's)
_prepared: dict[str, list[dict[str, Any]]] = {}


def prepare_case_results(store: Store, cases: Manifest, *, with_json: bool = False) -> None:
    """Make the `case_results` of the `cases` artifact now, for its summary to take
    (`prepared_case_results`): a run does this while its backend is called
    (`decflow.commands.ahead`), as the cases are all known before the calls.
    `with_json`: their JSON is written too as their answers come (`CaseJson`)."""
    global _case_json
    made = case_results(store.read(cases))
    _prepared.clear()
    _prepared[cases.sha256] = made
    _case_json = CaseJson(made) if with_json else None


def prepared_case_results(cases: Manifest) -> list[dict[str, Any]] | None:
    """The `case_results` made ahead for the `cases` artifact, if any (taken: a second
    summary of it makes its own)."""
    return _prepared.pop(cases.sha256, None)


class CaseJson:
    """The JSON text of a report's per-case results (`store.per_case_json`), made while a
    run's backend is called rather than after its last answer (20k cases: ~25 ms).

    Each answered chunk of the originals fills in its cases' `result` and `error` as
    `golden_cases` does (the same result objects); the cases in dataset order, as far as
    every one has its answer, are then written in blocks to an unnamed temporary file (no
    text is held in memory; the file goes with the process). The summary uses the text
    only for the very case dicts it was made of, each still holding the result and the
    error it was written with (`written_case_json`); otherwise, or for the cases after
    the text, it writes them itself.
    """

    BLOCK = 1024  # cases written at a time, at least (the last ones: however few)

    def __init__(self, cases: list[dict[str, Any]]) -> None:
        self.cases = cases
        self.at = {case["case_id"]: at for at, case in enumerate(cases)}
        self.answered = bytearray(len(cases))
        self.count = 0  # the cases written
        # the result and the error of each case written, as it was written
        self.results: list[dict[str, Any] | None] = []
        self.errors: list[dict[str, Any] | None] = []
        self.file: IO[bytes] | None = None
        self.failed = False  # a text orjson does not write as the store does: none kept

    def add(self, frame: pl.DataFrame, results: Mapping[str, dict[str, Any] | None]) -> None:
        """The `answer_results` of a result chunk (`frame`), by request id (an original's
        is its case's id)."""
        if self.failed:
            return
        errors = {}
        if frame["error_kind"].null_count() < frame.height:
            failed = frame.filter(pl.col("error_kind").is_not_null())
            errors = {request: {"kind": kind, "message": message}
                      for request, kind, message in zip(
                          failed["request_id"].to_list(), failed["error_kind"].to_list(),
                          failed["error_message"].to_list(), strict=True)}
        for request, result in results.items():
            at = self.at.get(request)
            if at is not None:
                case = self.cases[at]
                case["result"], case["error"] = result, errors.get(request)
                self.answered[at] = 1
        end = self.answered.find(0, self.count)
        end = len(self.cases) if end < 0 else end
        if end - self.count >= self.BLOCK or (end == len(self.cases) and end > self.count):
            self._write(end)

    def _write(self, end: int) -> None:
        block = self.cases[self.count:end]
        text = per_case_json(block)
        if text is None:
            self.failed = True
            return
        if self.file is None:
            self.file = tempfile.TemporaryFile()  # noqa: SIM115 - open across chunks
        if self.count:
            self.file.write(b",")
        self.file.write(memoryview(text)[1:-1])
        self.results += map(_RESULT, block)
        self.errors += map(_ERROR, block)
        self.count = end

    def text_of(self, results: list[dict[str, Any]]) -> WrittenItems | None:
        """(`results`, how many of its first cases were written, their text) when `results`
        are the cases it was made of and each written one still holds its result (the same
        object) and error; else None."""
        if self.failed or self.file is None or results is not self.cases:
            return None
        written = results[:self.count]
        # (by C loops: 20k cases, ~0.5 ms; a Python loop over them took ~4)
        if not all(map(operator.is_, map(_RESULT, written), self.results)) or list(
                map(_ERROR, written)) != self.errors:
            return None
        self.file.flush()
        return results, self.count, memoryview(
            mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ))


_RESULT, _ERROR = operator.itemgetter("result"), operator.itemgetter("error")
# the `CaseJson` of the cases prepared last (`prepare_case_results`), if asked for
_case_json: CaseJson | None = None


def written_case_json(results: list[dict[str, Any]]) -> WrittenItems | None:
    """The text of the per-case `results` made ahead (`CaseJson.text_of`), for the report's
    writer (`store.json_pieces`); taken: a second summary writes its own."""
    global _case_json
    made, _case_json = _case_json, None
    return None if made is None else made.text_of(results)


def plain_numbers(table: pl.DataFrame) -> bool:
    """Whether every number `golden_cases` writes of `table` is a probability, confidence
    or latency and none is below 1e-4 in magnitude (but 0): no input is a JSON value and no
    case or answer has metadata, so the report's writer need not look for the small floats
    orjson spells otherwise (`store.json_bytes`)."""
    if table["input_json"].null_count() < table.height:
        return False
    for column in ("metadata_json", "result_metadata_json"):
        texts = table[column]
        if not (texts.is_null() | texts.is_in(["", "{}"])).all():
            return False
    numbers = (table["probabilities"].explode(), table["confidence"], table["latency_ms"])
    return not any(((values.abs() < 1e-4) & (values != 0)).any() for values in numbers)


def _failure(case: dict[str, Any], served: str | None) -> dict[str, Any]:
    """A failing case's entry in `failures`, from its per-case result."""
    result, error = case["result"], case["error"]
    errored = error is not None
    return {
        **dict(zip(FAILURE_KEYS, (
            case["case_id"], "error" if errored else "mismatch", case["input"],
            case["expected"], None if errored else result["selected"],
            None if errored else result["confidence"],
            f"{error['kind']}: {error['message']}" if errored else None), strict=True)),
        **({"cache_entry": served} if served else {}),
    }


def _pick(values: list[Any], at: list[int] | None) -> list[Any]:
    """`values` at positions `at` (None: all of them)."""
    return values if at is None else [values[i] for i in at]


def _case_inputs(table: pl.DataFrame) -> list[Any]:
    """Each case's input: its stored JSON value decoded, else its text (`case_input`)."""
    texts = table["input_text"].fill_null("").to_list()
    objects = table["input_json"]
    if objects.null_count() == table.height:
        return texts
    given = {i: text for i, text in enumerate(objects.to_list()) if text is not None}
    for i, value in zip(given, _decode_each(list(given.values()), json.JSONDecoder()),
                        strict=True):
        texts[i] = value
    return texts


def _not_finite(constant: str) -> float:
    # a Python backend's metadata is stored as `json.dumps` spells it, NaN included; the
    # report has no such number (it was refused when the report was written)
    raise ValueError(f"Out of range float values are not JSON compliant: {constant}")


_FINITE = json.JSONDecoder(parse_constant=_not_finite)


def _json_objects(texts: pl.Series) -> list[dict[str, Any]]:
    """`_json_object` of each stored text, the non-empty ones found by polars and decoded
    in one pass (a call per case costs more than the decoding)."""
    objects: list[dict[str, Any]] = [{} for _ in range(texts.len())]
    given = ~(texts.is_null() | texts.is_in(["", "{}"]))
    if given.any():
        for i, value in zip(given.arg_true().to_list(),
                            _decode_each(texts.filter(given).to_list(), _FINITE), strict=True):
            objects[i] = value
    return objects


def _decode_each(texts: list[str], decoder: json.JSONDecoder) -> list[Any]:
    """Each JSON text decoded, in one pass when they make one array (they do when each is
    one JSON value, as stored), else one by one (so a bad text fails as on its own)."""
    if not texts:
        return []
    decoded: list[Any] = decoder.decode("[" + ",".join(texts) + "]")
    if len(decoded) != len(texts):
        decoded = [decoder.decode(text) for text in texts]
    return decoded
