"""Check runs as first-class runs: a stored production check is a baseline for a later
check (`check --baseline RUN` or `accepted`), two check runs diff as drift (`diff A B`:
B judged against A as its baseline), and `report RUN -c CONTRACT` re-gates a check run with
an edited contract. All from the stored reports' numbers, no record read again: drift by
the production check's own drift code, the contract's production and drift gates as point
estimates (DecGuard's)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decflow.errors import DecflowError
from decflow.gates.checks import status_of
from decflow.gates.headline import headline
from decflow.gates.production import config_settings, stored_gates
from decflow.gates.production_evidence import (
    check_report_checks,
    production_gating,
    stored_gating,
)
from decflow.gates.production_power import point_qualifiers
from decflow.metrics.production import drift
from decflow.report.loading import load_verified
from decflow.store.runs import REPORT, accepted_run, has_run, now_iso, read_run_file, report_path
from decflow.store.store import Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.gates import Gating, Production
    from decflow.contracts.loader import LoadedContract

ACCEPTED = "accepted"
RECORDS_BACKEND = "records"  # the backend name check runs are recorded and accepted under


def _kind(report: dict[str, Any]) -> str:
    kind = report.get("kind", "run")
    return f"a {report.get('mode', 'contract')} run" if kind == "run" else f"a {kind}"


def stored_check(store: Store, name: str, decision: str) -> tuple[str, dict[str, Any], str]:
    """(run id, verified report, sha256 of the stored report) of the check run `name` (a
    run id, or `accepted`: the check run accepted for `decision`)."""
    run_id = name
    if name == ACCEPTED:
        found = accepted_run(store, decision, RECORDS_BACKEND)
        if found is None:
            raise DecflowError(
                f"no accepted check run for decision '{decision}' in the store {store.url}; "
                "accept one with `decflow runs accept RUN`")
        run_id = found
    elif not has_run(store, name):
        raise DecflowError(
            f"--baseline '{name}' is neither records or a report (no such file or folder) "
            f"nor a run id in the store {store.url} (see `decflow runs`)")
    report = load_verified(run_id, store)[0].to_dict()
    if report.get("kind") != "check":
        raise DecflowError(f"run {run_id} is {_kind(report)}, not a check run: a check's "
                           "baseline is records, a check report or a check run")
    data = read_run_file(store, run_id, REPORT)  # the bytes load_verified checked
    return run_id, report, "sha256:" + hashlib.sha256(data).hexdigest()


def _same_decision(report: dict[str, Any], other: dict[str, Any], what: str) -> None:
    mine, theirs = report["contract"], other["contract"]
    key = ("name", "type", "labels")
    if [mine[k] for k in key] != [theirs[k] for k in key]:
        raise DecflowError(
            f"cannot compare: {what} is for '{theirs['name']}' ({theirs['type']}: "
            f"{', '.join(theirs['labels'])}), the check for '{mine['name']}' ({mine['type']}: "
            f"{', '.join(mine['labels'])})")


def _same_bins(report: dict[str, Any], other: dict[str, Any], what: str) -> None:
    bins = report["evaluation"]["calibration_bins"], other["evaluation"]["calibration_bins"]
    if bins[0] != bins[1]:
        raise DecflowError(f"cannot compare: {what} used {bins[1]} calibration bins, the check "
                           f"{bins[0]}; run the check again with one contract")


def rejudge(report: dict[str, Any], production: Production,
            baseline: dict[str, Any] | None, *, gating: Gating,
            fail_on_warn: bool = False) -> dict[str, Any]:
    """The check report judged again from its stored metrics: drift against `baseline`
    (a report `baseline` block, or None), the `production` gates judged by `gating`."""
    metrics = report["metrics"]
    baseline_metrics = None if baseline is None else baseline["metrics"]
    drift_values = drift(metrics, baseline_metrics)
    aggregate, per_segment = check_report_checks(production, metrics, drift_values,
                                                 report["segments"], gating=gating,
                                                 baseline=baseline_metrics)
    segments = [{**entry, "checks": [c.to_dict() for c in checks],
                 "status": status_of(checks)[0]}
                for entry, checks in zip(report["segments"], per_segment, strict=True)]
    checks = aggregate + [c for cs in per_segment for c in cs]
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    qualifiers = point_qualifiers(status, checks, metrics, baseline_metrics, report["segments"])
    # the segments the records were split by, the gates judged now
    config = config_settings(production, report["config"]["segments"], gating)
    judged = {key: value for key, value in report.items() if key != "qualifiers"}
    if qualifiers:
        judged["qualifiers"] = [q.to_dict() for q in qualifiers]
    return {**judged, "created_at": now_iso(), "status": status, "exit_code": exit_code,
            "headline": headline(status, checks, qualifiers=qualifiers), "config": config,
            "baseline": baseline,
            "drift": drift_values, "segments": segments,
            "checks": [c.to_dict() for c in checks]}


def diff_checks(old: dict[str, Any], new: dict[str, Any], store: Store, *,
                baseline_source: str, baseline_run: str | None,
                contract: Contract | None = None,
                fail_on_warn: bool = False) -> dict[str, Any]:
    """`diff A B` of two check reports: B judged against A as its baseline (drift), with
    the production and drift gates of `contract`, else those B was judged with."""
    what = f"the baseline {baseline_source}"
    _same_decision(new, old, what)
    _same_bins(new, old, what)
    data = (store.read_bytes(report_path(baseline_run)) if baseline_run is not None
            else Path(baseline_source).read_bytes())
    block = {"source": "report" if baseline_run is None else "run", "path": baseline_source,
             "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
             "n_records": old["dataset"]["n_records"], "metrics": old["metrics"]}
    if baseline_run is not None:
        block["run_id"] = baseline_run
    if contract is None:
        production, gating = stored_gates(new["config"]), stored_gating(new["config"])
    else:
        production, gating = contract.production, production_gating(contract)[0]
    return rejudge(new, production, block, gating=gating, fail_on_warn=fail_on_warn)


def regate_check(report: dict[str, Any], loaded: LoadedContract, contract_path: str, *,
                 fail_on_warn: bool = False) -> dict[str, Any]:
    """A check report re-gated with an edited contract (same decision and evaluation
    settings: its stored metrics hold for those only)."""
    contract = loaded.contract
    decision = contract.decision
    own = {"contract": {"name": decision.name, "type": decision.type,
                        "labels": list(decision.labels)},
           "evaluation": {"calibration_bins": contract.evaluation.calibration_bins}}
    _same_decision(report, own, f"the contract {contract_path}")
    _same_bins(report, own, f"the contract {contract_path}")
    if contract.evaluation.confidence_threshold != report["evaluation"]["confidence_threshold"]:
        raise DecflowError(f"cannot re-gate: the contract {contract_path} sets another "
                           "confidence_threshold than the check used; run the check again")
    regated = rejudge(report, contract.production, report.get("baseline"),
                      gating=production_gating(contract)[0], fail_on_warn=fail_on_warn)
    regated["contract"] = {**report["contract"], "path": contract_path, "hash": loaded.hash}
    regated["regated_at"] = now_iso()
    return regated


def is_check_diff(old: dict[str, Any], new: dict[str, Any], old_source: str) -> bool:
    """Whether `diff` of these two reports is a diff of check runs; a check run and a
    contract run (or a probe) cannot be compared."""
    kinds = old.get("kind", "run"), new.get("kind", "run")
    if kinds == ("check", "check"):
        return True
    if "check" in kinds or "probe" in kinds:
        raise DecflowError(
            f"cannot diff {_kind(old)} ({old_source}) with {_kind(new)}: diff two contract "
            "runs (regression) or two check runs (drift)")
    return False
