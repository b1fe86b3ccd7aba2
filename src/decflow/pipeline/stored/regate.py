"""Re-gating: judge a stored run again with an edited contract, without any backend call.

A run in the store is rebuilt from its stage artifacts (golden results, transformed-case
comparisons); a standalone report file (decflow or DecGuard 0.1) from its inline results.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.backends.engine import RESULTS_SCHEMA
from decflow.data.golden_dataset import CASES_SCHEMA, compact_json
from decflow.errors import DecflowError
from decflow.pipeline.contract_run.summary import SUMMARY_UPSTREAM, build_report
from decflow.pipeline.driver import stored_manifests
from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stored.check_runs import regate_check
from decflow.report.model import ContractRef, Report, RunRef
from decflow.report.run_report import RunReport
from decflow.store.runs import REPORT, now_iso, read_run_json, read_run_record
from decflow.store.store import Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.loader import LoadedContract

def same_decision(contract: Contract, stored: ContractRef) -> None:
    decision = contract.decision
    if (decision.name, decision.type, list(decision.labels)) != (
        stored.name, stored.type, stored.labels
    ):
        raise DecflowError(
            f"cannot re-gate: the contract describes '{decision.name}' ({decision.type}: "
            f"{', '.join(decision.labels)}) but the run is '{stored.name}' "
            f"({stored.type}: {', '.join(stored.labels)})"
        )


def regate_stored_run(
    store: Store, run_id: str, loaded: LoadedContract, contract_path: str, *,
    fail_on_warn: bool,
) -> dict[str, Any]:
    record = read_run_record(store, run_id)
    spec = replace(RunSpec.from_dict(record["spec"]), contract_path=contract_path)
    stored_report = Report.view(read_run_json(store, run_id, REPORT))
    same_decision(loaded.contract, stored_report.contract or ContractRef())
    manifests = {
        name: m for name, m in stored_manifests(store, run_id).items() if name in SUMMARY_UPSTREAM
    }
    report = build_report(loaded, spec, store, manifests, fail_on_warn=fail_on_warn)
    report.created_at = stored_report.created_at
    if report.run is not None:
        report.run.regated_at = now_iso()
    return report.to_dict()


def inline_tables(report: RunReport) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cases and results tables rebuilt from a report's inline per-case results."""
    labels = report.contract.labels
    cases: dict[str, list[Any]] = {name: [] for name in CASES_SCHEMA}
    results: dict[str, list[Any]] = {name: [] for name in RESULTS_SCHEMA}
    for position, item in enumerate(report.results, start=1):
        value = item["input"]
        cases["case_id"].append(item["case_id"])
        cases["input_text"].append(value if isinstance(value, str) else None)
        cases["input_json"].append(None if isinstance(value, str) else compact_json(value))
        cases["expected"].append(item["expected"])
        cases["metadata_json"].append(compact_json(item.get("metadata") or {}))
        cases["position"].append(position)
        result, error = item["result"], item["error"]
        results["request_id"].append(item["case_id"])
        results["probabilities"].append(
            [result["probabilities"][label] for label in labels] if result else None
        )
        for key in ("selected", "confidence", "latency_ms", "model", "model_version"):
            results[key].append(result[key] if result else None)
        results["metadata_json"].append(
            json.dumps(result["metadata"], sort_keys=True) if result and result["metadata"]
            else None
        )
        results["cache_entry"].append(result.get("cache_entry") if result else None)
        results["error_kind"].append(error["kind"] if error else None)
        results["error_message"].append(error["message"] if error else None)
    return (
        pl.DataFrame(cases, schema=CASES_SCHEMA),
        pl.DataFrame(results, schema=RESULTS_SCHEMA),
    )


def regate_inline(
    report: RunReport, loaded: LoadedContract, contract_path: str, *,
    fail_on_warn: bool,
) -> dict[str, Any]:
    """Re-gate the golden part of a standalone report (its artifacts are not reachable)."""
    import uuid

    same_decision(loaded.contract, report.contract)
    cases, results = inline_tables(report)
    store = Store(f"memory://decflow-regate-{uuid.uuid4().hex}")
    backend = report.backend
    manifests = {
        "cases": store.publish("cases", "inline", cases, extra=report.dataset.to_dict()),
        "results": store.publish(
            "results", "inline", results,
            extra={"backend": {"name": backend.name, "provider": backend.provider,
                               "model": backend.model, "details": backend.details},
                   "health": None if report.health is None else report.health.to_dict()},
        ),
    }
    spec = RunSpec(
        contract_path=contract_path,
        store_url=store.url,
        run_id=(report.run.id if report.run else None) or "inline",
        mode="test",
        created_at=report.created_at or now_iso(),
    )
    regated = build_report(loaded, spec, store, manifests, fail_on_warn=fail_on_warn)
    regated.run = RunRef(id=spec.run_id, store=None, regated_at=now_iso(), artifacts={})
    return regated.to_dict()


def show_or_regate(
    target: str, store: Store, contract_path: str | None, *, fail_on_warn: bool = False
) -> dict[str, Any]:
    """A stored report (a file, or a run id in `store`), verified; with `contract_path`,
    re-gated with that contract: from the run's stored stages when they are reachable, else
    the golden part from the report's inline results."""
    from decflow.contracts import load_contract
    from decflow.report.loading import load_verified

    report, _source, run_id = load_verified(target, store)
    if contract_path is None:
        if fail_on_warn and report.status == "warn":
            return {**report.to_dict(), "exit_code": 1}
        return report.to_dict()
    loaded = load_contract(contract_path)
    if report.kind == "check":
        return regate_check(report.to_dict(), loaded, contract_path, fail_on_warn=fail_on_warn)
    if not isinstance(report, RunReport):
        raise DecflowError(f"{target}: a {report.kind} report has no gates to re-gate; "
                           "re-gate a contract run or a check run")
    if run_id is not None:
        return regate_stored_run(store, run_id, loaded, contract_path, fail_on_warn=fail_on_warn)
    return regate_inline(report, loaded, contract_path, fail_on_warn=fail_on_warn)
