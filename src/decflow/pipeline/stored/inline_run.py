"""A standalone report file's run rebuilt in a memory store from what the file carries
inline, so a re-gate judges every gate of the report's mode without a backend call: the cases
and golden results of every report, and every transformed case with its answer and reduced
example of a DecGuard 0.1 `fuzz` or `test --all` report (its `properties.pairs`).

A decflow report names its transformed cases, reruns and persona arms by store path instead
of inlining them: such a report is re-gated from its run in the store (`missing_inline`
says what a file lacks).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.backends.results_schema import RESULTS_SCHEMA
from decflow.data.golden_dataset import CASES_SCHEMA, compact_json
from decflow.pipeline.contract_run.comparisons import MINIMIZED_SCHEMA, compare_transformed
from decflow.pipeline.contract_run.inputs import original_requests
from decflow.pipeline.contract_run.results import chunk_name
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.report.modes import mode_named
from decflow.report.run_report import RunReport
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

KEY = "inline"


def missing_inline(report: RunReport) -> list[str]:
    """What a re-gate of `report`'s mode needs that the file does not carry inline."""
    mode = mode_named(report.mode)
    inline = _pairs(report) is not None  # DecGuard's transformed cases (it made no reruns)
    missing = []
    if not inline and mode.fills("properties"):
        missing.append("transformed cases and persona arms")
    if (not inline and mode.reruns) or mode.meter_by_default:
        missing.append("stability reruns")
    if report.sequential is not None:
        missing.append("sequential record")
    return missing


def _pairs(report: RunReport) -> list[dict[str, Any]] | None:
    return None if report.properties is None else report.properties.pairs


def _result_row(request_id: str, result: dict[str, Any] | None,
                error: dict[str, Any] | None, labels: list[str]) -> dict[str, Any]:
    """A results-table row of one stored answer (or error)."""
    row: dict[str, Any] = {
        "request_id": request_id,
        "probabilities": [result["probabilities"][label] for label in labels]
        if result else None,
        "metadata_json": json.dumps(result["metadata"], sort_keys=True)
        if result and result.get("metadata") else None,
        "cache_entry": result.get("cache_entry") if result else None,
        "error_kind": error["kind"] if error else None,
        "error_message": error["message"] if error else None,
    }
    for key in ("selected", "confidence", "latency_ms", "model", "model_version"):
        row[key] = result.get(key) if result else None
    return row


def _case_tables(report: RunReport) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cases and the originals' results from the report's inline per-case results."""
    labels = report.contract.labels
    cases: dict[str, list[Any]] = {name: [] for name in CASES_SCHEMA}
    results = []
    for position, item in enumerate(report.results, start=1):
        value = item["input"]
        cases["case_id"].append(item["case_id"])
        cases["input_text"].append(value if isinstance(value, str) else None)
        cases["input_json"].append(None if isinstance(value, str) else compact_json(value))
        cases["expected"].append(item["expected"])
        cases["metadata_json"].append(compact_json(item.get("metadata") or {}))
        cases["position"].append(position)
        results.append(_result_row(item["case_id"], item["result"], item["error"], labels))
    return (pl.DataFrame(cases, schema=CASES_SCHEMA),
            pl.DataFrame(results, schema=RESULTS_SCHEMA))


def _pair_tables(
    pairs: list[dict[str, Any]], labels: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Requests, results and reduced examples of DecGuard's transformed cases."""
    index = {label: i for i, label in enumerate(labels)}
    requests, results, reduced = [], [], []
    for pair in pairs:
        value = pair["input"]
        shown = pair.get("presentation") or [[label, label] for label in labels]
        requests.append({
            "request_id": pair["id"],
            "case_id": pair["case_id"],
            "property": pair["property"],
            "sample": pair["sample"],
            "input_text": value if isinstance(value, str) else None,
            "input_json": None if isinstance(value, str) else compact_json(value),
            "shown_labels": [s for s, _ in shown],
            "label_order": [index[label] for _, label in shown],
            "steps_json": json.dumps(pair.get("steps") or [], ensure_ascii=False),
            "pre_error_kind": None,
            "pre_error_message": None,
        })
        results.append(_result_row(pair["id"], pair.get("result"), pair.get("error"), labels))
        if pair.get("reduced"):
            reduced.append({"request_id": pair["id"],
                            "reduced_json": json.dumps(pair["reduced"], ensure_ascii=False),
                            "backend_calls": pair["reduced"].get("backend_calls", 0)})
    return (pl.DataFrame(requests, schema=REQUESTS_SCHEMA),
            pl.DataFrame(results, schema=RESULTS_SCHEMA),
            pl.DataFrame(reduced, schema=MINIMIZED_SCHEMA))


def inline_run(report: RunReport, contract: Contract) -> tuple[Store, dict[str, Manifest]]:
    """A memory store holding the stages a report file carries, and their manifests."""
    store = Store(f"memory://decflow-regate-{uuid.uuid4().hex}")
    labels = report.contract.labels
    cases, results = _case_tables(report)
    backend = report.backend
    results_extra = {
        "backend": {"name": backend.name, "provider": backend.provider,
                    "model": backend.model, "details": backend.details},
        "health": None if report.health is None else report.health.to_dict(),
    }
    manifests = {"cases": store.publish("cases", KEY, cases, extra=report.dataset.to_dict())}
    pairs = _pairs(report)
    if pairs is None:
        manifests["results"] = store.publish("results", KEY, results, extra=results_extra)
        return store, manifests
    requests, answers, reduced = _pair_tables(pairs, labels)
    assert report.properties is not None  # it has pairs
    manifests["requests"] = store.publish(
        "requests", KEY, [original_requests(cases, tuple(labels)), requests],
        extra={"skipped": report.properties.skipped},
    )
    # the transformed answers in a chunk of their phase (`phase_result_parts`)
    transformed = store.write_part(
        f"{store.stage_prefix('results', KEY)}/{chunk_name('transformed', 0)}.parquet", answers
    )
    manifests["results"] = store.publish("results", KEY, results, parts=[transformed],
                                         extra=results_extra)
    manifests["comparisons"] = compare_transformed(store, manifests, contract, KEY)
    manifests["minimized"] = store.publish("minimized", KEY, reduced)
    return store, manifests
