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
from decflow.data.golden_dataset import case_input
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
    return decision_results(contract, backend)(row)


def decision_results(
    contract: Contract, backend: dict[str, Any]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """`decision_result` with what every row shares worked out once (a run has thousands)."""
    decision = contract.decision
    name, kind, labels = decision.name, decision.type, decision.labels
    backend_name, provider = backend["name"], backend["provider"]

    def result(row: dict[str, Any]) -> dict[str, Any]:
        served = row.get("cache_entry")  # decflow: served from the call cache (absent: asked)
        return {
            "case_id": row["case_id"],
            "decision": name,
            "decision_type": kind,
            "labels": list(labels),
            "probabilities": dict(zip(labels, row["probabilities"], strict=True)),
            "selected": row["selected"],
            "confidence": row["confidence"],
            "backend": backend_name,
            "provider": provider,
            "model": row["model"],
            "model_version": row["model_version"],
            "latency_ms": row["latency_ms"],
            "metadata": _json_object(row["result_metadata_json"]),
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
    contract: Contract, table: pl.DataFrame, *, with_gates: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, checks when gated) of the original cases."""
    labels = tuple(contract.decision.labels)
    arrays = golden_arrays(table, labels)
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
    contract: Contract, table: pl.DataFrame, metrics: dict[str, Any], *, with_gates: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the report's `calibration` section, `max_smooth_ece` checks when gated) over the
    labeled decided cases: top-label confidence against correctness."""
    arrays = golden_arrays(table, tuple(contract.decision.labels))
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


CASE_COLUMNS = ("case_id", "input_text", "input_json", "expected", "metadata_json",
                "probabilities", "selected", "confidence", "model", "model_version",
                "latency_ms", "result_metadata_json", "error_kind", "error_message")


def golden_cases(
    contract: Contract, table: pl.DataFrame, backend: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per-case results, failures) of the original cases, in dataset order.

    The report's largest part: `build_report` makes it last, after the sections that read
    the transformed requests, so the two are never in memory together.
    """
    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    decision_result_of = decision_results(contract, backend)
    # runs stored before the call cache have no `cache_entry` column
    names = [*CASE_COLUMNS, *(["cache_entry"] if "cache_entry" in table.columns else [])]
    columns = [table[name].to_list() for name in names]
    for values in zip(*columns, strict=True):
        row = dict(zip(names, values, strict=True))
        value = case_input(row["input_text"], row["input_json"])
        expected, kind = row["expected"], row["error_kind"]
        errored = kind is not None
        results.append({
            "case_id": row["case_id"],
            "input": value,
            "expected": expected,
            "metadata": _json_object(row["metadata_json"]),
            "result": None if errored else decision_result_of(row),
            "error": {"kind": kind, "message": row["error_message"]} if errored else None,
        })
        if errored or (expected is not None and row["selected"] != expected):
            failures.append(
                {
                    "case_id": row["case_id"],
                    "kind": "error" if errored else "mismatch",
                    "input": value,
                    "expected": row["expected"],
                    "selected": None if errored else row["selected"],
                    "confidence": None if errored else row["confidence"],
                    "error": f"{row['error_kind']}: {row['error_message']}" if errored else None,
                    **({"cache_entry": row["cache_entry"]} if row.get("cache_entry") else {}),
                }
            )
    return results, failures
