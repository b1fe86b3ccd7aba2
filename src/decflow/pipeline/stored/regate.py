"""Re-gating: judge a stored run again with an edited contract, without any backend call.

A run in the store is rebuilt from its stage artifacts (golden results, transformed-case
comparisons, reruns); a standalone report file (decflow or DecGuard 0.1) from what it
carries inline, and refused when its mode's gates need stages it does not carry.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from decflow.errors import DecflowError
from decflow.pipeline.contract_run.later_stages import SUMMARY_UPSTREAM
from decflow.pipeline.contract_run.summary import build_report
from decflow.pipeline.driver import stored_manifests
from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stored.check_runs import regate_check
from decflow.pipeline.stored.inline_run import inline_run, missing_inline
from decflow.report.model import ContractRef, Report, RunRef
from decflow.report.modes import mode_named
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


def regate_inline(
    report: RunReport, loaded: LoadedContract, contract_path: str, *, source: str,
    store: Store, fail_on_warn: bool,
) -> dict[str, Any]:
    """Re-gate a standalone report (its run's artifacts are not in the store) from what it
    carries inline: every gate of its mode, or an error naming what it lacks."""
    same_decision(loaded.contract, report.contract)
    missing = missing_inline(report)
    if missing:
        run = report.run
        where = shlex.quote(run.store) if run and run.store else "STORE"
        raise DecflowError(
            f"{source}: re-gating a {mode_named(report.mode).command} report needs its run's "
            f"stored {', '.join(missing)}, which the file does not carry and the store "
            f"{store.url} does not hold; re-gate the run in its own store: `decflow report "
            f"{run.id if run and run.id else 'RUN'} -c {shlex.quote(contract_path)} "
            f"--store {where}`"
        )
    memory, manifests = inline_run(report, loaded.contract)
    properties = report.properties
    spec = RunSpec(
        contract_path=contract_path,
        store_url=memory.url,
        run_id=(report.run.id if report.run else None) or "inline",
        mode=report.mode,
        seed=properties.seed if properties is not None and isinstance(properties.seed, int)
        else None,
        created_at=report.created_at or now_iso(),
        rounding_seed=report.rounding_seed,
    )
    regated = build_report(loaded, spec, memory, manifests, fail_on_warn=fail_on_warn)
    regated.run = RunRef(id=spec.run_id, store=None, regated_at=now_iso(), artifacts={})
    return regated.to_dict()


def show_or_regate(
    target: str, store: Store, contract_path: str | None, *, fail_on_warn: bool = False
) -> dict[str, Any]:
    """A stored report (a file, or a run id in `store`), verified; with `contract_path`,
    re-gated with that contract, every gate of its mode: from the run's stored stages when
    they are in `store`, else from what the report file carries inline (`inline_run`)."""
    from decflow.contracts import load_contract
    from decflow.report.loading import load_verified

    report, source, run_id = load_verified(target, store,
                                           judged_again=contract_path is not None)
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
    return regate_inline(report, loaded, contract_path, source=source, store=store,
                         fail_on_warn=fail_on_warn)
