"""The golden part of a summary: per-case results, metrics, failures, golden checks.

Everything is computed from the stored `cases` and `results` tables, so a stored run can be
re-gated with an edited contract without calling the backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

def originals(cases: pl.DataFrame, results: pl.DataFrame) -> pl.DataFrame:
    """Cases in dataset order joined with their original (unchanged) request's result.

    The case's metadata stays `metadata_json`; the backend's is `result_metadata_json`.
    """
    answers = results.rename({"metadata_json": "result_metadata_json"})
    return cases.join(answers, left_on="case_id", right_on="request_id", how="left",
                      maintain_order="left")


def golden_arrays(table: pl.DataFrame, labels: tuple[str, ...]) -> dict[str, Any]:
    index = {label: i for i, label in enumerate(labels)}
    return {
        "probabilities": probability_matrix(table["probabilities"], len(labels)),
        "errored": table["error_kind"].is_not_null().to_numpy(),
        "expected_index": np.array(
            [index.get(e, -1) if e is not None else -1 for e in table["expected"]],
            dtype=np.int64,
        ),
        "latency_ms": table["latency_ms"].fill_null(float("nan")).to_numpy(),
        "error_kinds": table["error_kind"].to_list(),
    }


def decision_result(
    row: dict[str, Any], contract: Contract, backend: dict[str, Any]
) -> dict[str, Any]:
    return decision_results(contract, backend)(
        tuple(row[column] for column in ANSWER_COLUMNS),
        _json_object(row["result_metadata_json"]),
        row.get("cache_entry"),  # decflow: served from the call cache (absent: asked)
    )


# A case's answer as `decision_results` takes it, in this order.
ANSWER_COLUMNS = ("case_id", "probabilities", "selected", "confidence", "model", "model_version",
                  "latency_ms")
Answer = tuple[str, list[float], str, float, str | None, str | None, float | None]


def decision_results(
    contract: Contract, backend: dict[str, Any]
) -> Callable[[Answer, dict[str, Any], str | None], dict[str, Any]]:
    """`decision_result` of (a row's `ANSWER_COLUMNS`, its decoded metadata, its cache
    entry) with what every row shares worked out once (a run has thousands)."""
    decision = contract.decision
    name, kind, labels = decision.name, decision.type, tuple(decision.labels)
    backend_name, provider = backend["name"], backend["provider"]

    def result(answer: Answer, metadata: dict[str, Any], served: str | None) -> dict[str, Any]:
        case_id, probabilities, selected, confidence, model, version, latency = answer
        return {
            "case_id": case_id,
            "decision": name,
            "decision_type": kind,
            "labels": list(labels),
            "probabilities": dict(zip(labels, probabilities, strict=True)),
            "selected": selected,
            "confidence": confidence,
            "backend": backend_name,
            "provider": provider,
            "model": model,
            "model_version": version,
            "latency_ms": latency,
            "metadata": metadata,
            **({"cache_entry": served} if served else {}),
        }

    return result


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


# The columns `golden_cases` reads of a case besides its answer and the metadata JSON texts.
CASE_COLUMNS = ("case_id", "input_text", "input_json", "expected", "error_kind", "error_message")


def golden_cases(
    contract: Contract, table: pl.DataFrame, backend: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per-case results, failures) of the original cases, in dataset order.

    The report's largest part: `build_report` makes it last, after the sections that read
    the transformed requests, so the two are never in memory together. One pass over the
    columns (a run has tens of thousands of cases).
    """
    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    decision_result_of = decision_results(contract, backend)
    # runs stored before the call cache have no `cache_entry` column
    served_of = (table["cache_entry"].to_list() if "cache_entry" in table.columns
                 else [None] * table.height)
    metadata = _json_objects(table["metadata_json"].to_list())
    result_metadata = _json_objects(table["result_metadata_json"].to_list())
    cases = zip(*(table[column].to_list() for column in CASE_COLUMNS), strict=True)
    answers = zip(*(table[column].to_list() for column in ANSWER_COLUMNS), strict=True)
    for (case_id, text, obj, expected, error_kind, error_message), answer, case_metadata, \
            answer_metadata, served in zip(cases, answers, metadata, result_metadata, served_of,
                                           strict=True):
        value = (json.loads(obj) if obj is not None  # as `case_input`, inlined
                 else text if text is not None else "")
        errored = error_kind is not None
        selected, confidence = answer[2], answer[3]
        results.append({
            "case_id": case_id,
            "input": value,
            "expected": expected,
            "metadata": case_metadata,
            "result": None if errored else decision_result_of(answer, answer_metadata, served),
            "error": {"kind": error_kind, "message": error_message} if errored else None,
        })
        if errored or (expected is not None and selected != expected):
            failures.append(
                {
                    "case_id": case_id,
                    "kind": "error" if errored else "mismatch",
                    "input": value,
                    "expected": expected,
                    "selected": None if errored else selected,
                    "confidence": None if errored else confidence,
                    "error": f"{error_kind}: {error_message}" if errored else None,
                    **({"cache_entry": served} if served else {}),
                }
            )
    return results, failures


def _not_finite(constant: str) -> float:
    # a Python backend's metadata is stored as `json.dumps` spells it, NaN included; the
    # report has no such number (it was refused when the report was written)
    raise ValueError(f"Out of range float values are not JSON compliant: {constant}")


_FINITE = json.JSONDecoder(parse_constant=_not_finite)


def _json_objects(texts: list[str | None]) -> list[dict[str, Any]]:
    """`_json_object` of each stored text, the non-empty ones decoded in one pass (a call
    per case costs more than the decoding)."""
    objects: list[dict[str, Any]] = [{} for _ in texts]
    given = {i: text for i, text in enumerate(texts) if text and text != "{}"}
    if not given:
        return objects
    decoded = _FINITE.decode("[" + ",".join(given.values()) + "]")
    if len(decoded) != len(given):  # not one object per text: decode each, as stored
        decoded = [_FINITE.decode(text) for text in given.values()]
    for i, value in zip(given, decoded, strict=True):
        objects[i] = value
    return objects
