"""Regression diff of two runs or reports, and accepted baselines.

`run_diff` loads and verifies both sides (report files, or run ids in the store; decflow or
DecGuard 0.1 run reports), and `diff_reports` matches them case by case and gates the
regression. `accepted` as the baseline means the run accepted for the candidate's decision
and backend (`decflow runs accept`); when there is none, `NoAcceptedBaseline` (exit 2)
names the decision, the backend and the command that accepts a run. Shared by the CLI, the
SDK and the nightly regression flow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from decflow.contracts.gates import diff_gates
from decflow.errors import DecflowError
from decflow.gates.checks import status_of
from decflow.gates.regression import NOISE_ADVICE, regression_checks
from decflow.metrics.calibration import diff_calibration
from decflow.metrics.regression import DiffSettings, diff_results, paired_diff
from decflow.metrics.regression_evidence import PairedDiff
from decflow.pipeline.diff_evidence import gating_rule, side_reruns
from decflow.pipeline.noise import Reruns
from decflow.pipeline.stage import ProgressFactory
from decflow.pipeline.stored.check_runs import RECORDS_BACKEND, diff_checks, is_check_diff
from decflow.pipeline.stored.contracts import stored_contract
from decflow.pipeline.trend import decision_trend
from decflow.report.diff_report import DiffCalibration, DiffEvidence, DiffReport, DiffSide
from decflow.report.loading import load_verified
from decflow.report.model import CheckRow, ContractRef, Evaluation
from decflow.report.versions import DECGUARD_REPORT_VERSION, REPORT_VERSION
from decflow.store.runs import accepted_run, now_iso
from decflow.store.store import Store
from decflow.version import __version__

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

ACCEPTED = "accepted"
Decision = tuple[str | None, str | None, tuple[str, ...]]


class NoAcceptedBaseline(DecflowError):
    """`accepted` was asked for, but no run is accepted for the decision and backend."""

    def __init__(self, decision: str, backend: str, candidate_run: str | None,
                 store: Store) -> None:
        self.decision, self.backend = decision, backend
        accept = f"decflow runs accept {candidate_run or 'RUN'} --store {store.url}"
        super().__init__(
            f"no accepted baseline for decision '{decision}' and backend '{backend}' in the "
            f"store {store.url}; nothing was compared. Accept a run as the baseline with "
            f"`{accept}`"
        )


def _decision(report: dict[str, Any]) -> Decision:
    contract = report.get("contract") or {}
    return contract.get("name"), contract.get("type"), tuple(contract.get("labels") or ())


def _describe(decision: Decision) -> str:
    name, kind, labels = decision
    return f"'{name}' ({kind}: {', '.join(labels)})"


def _identity(report: dict[str, Any], path: str, cached: bool) -> DiffSide:
    """One side of the diff; `cached`: either run used the call cache, so each side says
    how many of its answers the cache served."""
    return DiffSide.model_validate({
        "path": path,
        "created_at": report.get("created_at"),
        "mode": report.get("mode"),
        "contract_hash": (report.get("contract") or {}).get("hash"),
        "dataset": report.get("dataset"),
        "backend": report.get("backend"),
        **({"call_cache": _cache_use(report)} if cached else {}),
    })


def _cache_use(report: dict[str, Any]) -> dict[str, Any]:
    used = report.get("call_cache")
    if not used:
        return {"mode": "off", "requests_sent": None, "served_from_cache": 0}
    return {key: used[key] for key in ("mode", "requests_sent", "served_from_cache")}


def diff_reports(
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    *,
    paths: tuple[str, str],
    contract: Contract | None = None,
    contract_path: str | None = None,
    segment_by: Sequence[str] | None = None,
    fail_on_warn: bool = False,
    reruns: tuple[Reruns, Reruns] = (Reruns(), Reruns()),
) -> dict[str, Any]:
    """The diff report of two loaded (already verified) run reports, named by `paths`
    (baseline, candidate) in the report. Evaluation settings
    and gates come from `contract` when given, else from the candidate report (gates: only
    the implicit error-rate requirement); `reruns` are each side's rerun noise. Raises
    `DecflowError` for different decisions."""
    before, after = _decision(baseline), _decision(candidate)
    if before != after:
        raise DecflowError(f"cannot compare {_describe(before)} with {_describe(after)}")
    regression = None
    if contract is not None:
        decision = contract.decision
        own = (decision.name, decision.type, tuple(decision.labels))
        if own != after:
            raise DecflowError(
                f"{contract_path}: the contract describes {_describe(own)}, "
                f"but the reports are for {_describe(after)}"
            )
        regression = contract.regression
        # the diff's evaluation settings, as DecGuard's (how answers were got is per side)
        evaluation = {key: value for key, value in contract.evaluation.model_dump().items()
                      if key != "call_cache"}
    else:
        evaluation = dict(candidate.get("evaluation") or {})
    keys = list(segment_by) if segment_by else list(regression.segment_by if regression else [])
    settings = DiffSettings(tuple(after[2]), str(after[1]),
                            int(evaluation.get("calibration_bins", 10)),
                            evaluation.get("confidence_threshold"))
    diff = diff_results(
        baseline["results"],
        candidate["results"],
        settings,
        segment_by=keys,
        min_segment_size=regression.min_segment_size if regression else 5,
        gates=[] if regression is None else [
            gate for gate in diff_gates() if gate.diff is not None and any(
                regression.limit(level, gate.diff) is not None
                for level in ("requirement", "warning"))],
    )
    gating, why = gating_rule(contract, (baseline, candidate))
    paired, segments = paired_diff(
        baseline["results"], candidate["results"], settings,
        reruns_before=reruns[0].by_case or None, reruns_after=reruns[1].by_case or None,
        segment_by=keys, min_segment_size=regression.min_segment_size if regression else 5,
    )
    verdicts = regression_checks(regression, diff, paired=paired, segments=segments,
                                 gating=gating)
    checks = verdicts.checks
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    ece = diff["metrics"].get("ece") or {}
    limits = {} if regression is None else {
        level: limit for level in ("requirement", "warning")
        if (limit := regression.limit(level, "max_ece_increase")) is not None}
    calibration = diff_calibration(  # each run's own stored reliability bins
        ((baseline.get("metrics") or {}).get("calibration") or {}).get("reliability") or [],
        ((candidate.get("metrics") or {}).get("calibration") or {}).get("reliability") or [],
        (ece.get("baseline"), ece.get("candidate")), limits)
    cached = bool(baseline.get("call_cache") or candidate.get("call_cache"))
    same = (baseline.get("dataset") or {}).get("hash") == (candidate.get("dataset") or {}).get(
        "hash"
    )
    return DiffReport(
        report_version=REPORT_VERSION,
        decflow_version=__version__,
        kind="diff",
        created_at=now_iso(),
        status=status,
        exit_code=exit_code,
        headline=verdicts.headline(status),
        contract=ContractRef.model_validate(
            {"name": after[0], "type": after[1], "labels": list(after[2]), "path": contract_path}),
        baseline=_identity(baseline, paths[0], cached),
        candidate=_identity(candidate, paths[1], cached),
        same_dataset=same,
        evaluation=Evaluation.model_validate(evaluation),
        counts=diff["counts"],
        shift=diff["shift"],
        metrics=diff["metrics"],
        calibration=DiffCalibration.model_validate(calibration),
        segments=diff["segments"],
        checks=[CheckRow.model_validate(c.to_dict()) for c in checks],
        changes=diff["changes"],
        evidence=DiffEvidence.model_validate({
            "gating": gating,
            "why": why,
            "noise": _noise(paired, reruns),
            "gates": [g.to_dict() for g in verdicts.gates],
        }),
    ).to_dict()


def _noise(paired: PairedDiff, reruns: tuple[Reruns, Reruns]) -> dict[str, Any]:
    """The rerun noise the diff used, or how to measure it."""
    summary = paired.noise_summary()
    if summary is None:
        return {"measured": False, "advice": NOISE_ADVICE}
    return {"measured": True, "sources": [*reruns[0].sources, *reruns[1].sources], **summary}


def accepted_baseline(store: Store, candidate: dict[str, Any]) -> str:
    """The run accepted for the candidate's decision and backend (`NoAcceptedBaseline`
    when there is none)."""
    decision = candidate["contract"]["name"]
    backend = (RECORDS_BACKEND if candidate.get("kind") == "check"
               else candidate["backend"]["name"])
    found = accepted_run(store, decision, backend)
    if found is None:
        raise NoAcceptedBaseline(decision, backend, (candidate.get("run") or {}).get("id"),
                                 store)
    return found


def gating_contract(
    candidate: dict[str, Any], store: Store, contract_path: str | None
) -> tuple[str | None, str]:
    """(contract to gate with, what the report says about it). `-c` wins; else a decflow
    run is gated by the contract it was made with (kept with the run); a DecGuard report,
    or a run whose store is out of reach, gets DecGuard's implicit error-rate gate only."""
    if contract_path is not None:
        return contract_path, f"the contract {contract_path}"
    only_errors = "only the implicit error-rate requirement applies, as in DecGuard"
    if candidate.get("report_version") == DECGUARD_REPORT_VERSION:
        return None, (f"{only_errors} (a DecGuard report carries no contract; pass -c "
                      "CONTRACT to gate the regression)")
    copy = stored_contract(candidate, store)
    if copy is not None:
        return str(copy), f"the candidate run's own contract ({copy})"
    where = (candidate.get("run") or {}).get("store") or "unknown"
    return None, (f"{only_errors}: the candidate run's store ({where}) is not reachable, so "
                  "its contract is not either; pass -c CONTRACT to gate the regression")


def known_segment_keys(keys: Sequence[str], *reports: dict[str, Any]) -> None:
    """`-s KEY` must name a metadata key some case of the reports has."""
    known = sorted({str(key) for report in reports for item in report.get("results") or []
                    if isinstance(item, dict) for key in (item.get("metadata") or {})})
    unknown = [key for key in keys if key not in known]
    if unknown:
        raise DecflowError(
            f"-s/--segment-by: no case of either run has the metadata key '{unknown[0]}' "
            f"(keys: {', '.join(known) or 'none: the cases carry no metadata'})")


def run_diff(
    baseline: str,
    candidate: str,
    store: Store,
    *,
    contract_path: str | None = None,
    segment_by: Sequence[str] | None = None,
    fail_on_warn: bool = False,
    noise_reruns: int = 0,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """Load and verify two reports (files, or run ids in `store`; `baseline` may be
    `accepted`) and diff them, gated by `gating_contract`, against the rerun noise the
    store holds for either run (`noise_reruns` > 0 first makes the candidate's noise run
    when it has no reruns)."""
    from decflow.contracts import load_contract

    verified, new_source, new_run = load_verified(candidate, store)
    new = verified.to_dict()
    if baseline == ACCEPTED:
        baseline = accepted_baseline(store, new)
    verified, old_source, old_run = load_verified(baseline, store)
    old = verified.to_dict()
    if is_check_diff(old, new, old_source):
        if segment_by:
            raise DecflowError("-s/--segment-by applies to diffs of contract runs; a check "
                               "run's segments are the contract's production.segments")
        contract = None if contract_path is None else load_contract(contract_path).contract
        return diff_checks(old, new, store, baseline_source=old_source, baseline_run=old_run,
                           contract=contract, fail_on_warn=fail_on_warn)
    if segment_by:
        known_segment_keys(segment_by, old, new)
    gates_path, gates_from = gating_contract(new, store, contract_path)
    contract = None if gates_path is None else load_contract(gates_path).contract
    width = len((new.get("contract") or {}).get("labels") or ())
    reruns = side_reruns(store, old_run, (new, new_run), width, noise_reruns=noise_reruns,
                         progress=progress)
    report = diff_reports(
        old,
        new,
        paths=(baseline if old_source == baseline else old_source,
               candidate if new_source == candidate else new_source),
        contract=contract,
        contract_path=gates_path,
        segment_by=segment_by,
        fail_on_warn=fail_on_warn,
        reruns=reruns,
    )
    trend = None
    if new_run is not None:
        trend = decision_trend(store, str(_decision(new)[0]),
                               backend=(new.get("backend") or {}).get("name"))
    return {**report, "gates_from": gates_from, "trend": trend}
