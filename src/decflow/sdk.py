"""The Python SDK: one decision through the contract's policy, and the same checks the CLI
runs, returning the same report objects the CLI prints.

    with DecisionGuard.from_contract("contracts/refund/decflow.yaml") as guard:
        decision = guard.decide("The parcel never arrived")
        decision.action, decision.fallback_backend, decision.result["selected"]

Fallback is a directive for the application, never an automatic call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decflow.backends.base import Backend
from decflow.errors import DecflowError
from decflow.report.modes import ModeName

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract
    from decflow.contracts.sections import Policy, Route
    from decflow.report.model import Report

@dataclass(frozen=True)
class PolicyDecision:
    result: dict[str, Any]
    action: str
    fallback_backend: str | None
    route_index: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "action": self.action,
            "fallback_backend": self.fallback_backend,
            "route_index": self.route_index,
        }


def first_route(policy: Policy, confidence: float) -> tuple[int, Route]:
    """The first route whose `confidence_gte` ≤ confidence, or the unconditional last one."""
    for index, route in enumerate(policy.routes):
        if route.when is None or confidence >= route.when.confidence_gte:
            return index, route
    raise DecflowError("the policy has no unconditional final route")  # validated at load


class DecisionGuard:
    """A contract's decision with its policy, backed by one of its backends (or yours)."""

    def __init__(
        self, loaded: LoadedContract, backend_name: str, backend: Backend | None = None
    ) -> None:
        from decflow.pipeline.direct_calls import CandidateDecider

        self.loaded = loaded
        self.contract = loaded.contract
        self.backend_name = backend.name if backend is not None else backend_name
        self.decider = CandidateDecider(self.contract, backend_name, 1, backend)

    @classmethod
    def from_contract(
        cls,
        contract: str | Path | LoadedContract,
        *,
        backend: str | Backend | None = None,
        check_health: bool = False,
        call_timeout: float | None = None,
    ) -> DecisionGuard:
        """The contract's decision, backed by its backend `backend` (a name) or by a
        `Backend` object of yours; the object runs in a thread of its own, each call
        limited to `call_timeout` seconds (default `DECFLOW_CALL_TIMEOUT`, else 120)."""
        from decflow.contracts import LoadedContract, load_contract

        loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
        if isinstance(backend, Backend):
            from decflow.backends.threaded import ThreadedBackend

            guard = cls(loaded, backend.name, ThreadedBackend(backend, call_timeout))
        else:
            guard = cls(loaded, backend or "default")
        if check_health:
            health = guard.decider.health()
            if health.status == "unhealthy":
                guard.close()
                raise DecflowError(f"backend '{guard.backend_name}' is unhealthy: {health.detail}")
        return guard

    def decide(self, value: str | dict[str, Any], *, case_id: str = "sdk") -> PolicyDecision:
        """Decide one input and route it; backend failures raise DecflowError."""
        if self.contract.policy is None:
            raise DecflowError(f"{self.loaded.path}: the contract has no 'policy' section")
        row = self.decider.decide([(value, None)], [case_id]).row(0, named=True)
        if row["error_kind"] is not None:
            raise DecflowError(
                f"backend '{self.backend_name}' failed: {row['error_kind']}: {row['error_message']}"
            )
        from decflow.pipeline.contract_run.golden_section import decision_result

        result = decision_result(
            {**row, "case_id": case_id, "result_metadata_json": row["metadata_json"]},
            self.contract,
            {"name": self.backend_name, "provider": self.decider.backend.provider},
        )
        index, route = first_route(self.contract.policy, result["confidence"])
        return PolicyDecision(result, route.action, route.backend, index)

    def close(self) -> None:
        self.decider.close()

    def __enter__(self) -> DecisionGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_test(
    contract: str | Path,
    *,
    mode: ModeName = "test",
    dataset: str | None = None,
    backend: str = "default",
    store: str | None = None,
    seed: int | None = None,
    properties: list[str] | None = None,
    minimize: bool | None = None,
    max_concurrency: int | None = None,
    check_health: bool = True,
    fail_on_warn: bool = False,
    allow_paths: Sequence[str] = (),
    sequential: bool | dict[str, Any] | None = None,
    call_cache: str | None = None,
) -> dict[str, Any]:
    """`decflow test` (mode test|all), `decflow fuzz` (mode fuzz) or `decflow stability`:
    the report dict the CLI prints. Gate failures are in the report; problems raise.
    Files the contract names must lie in its folder or in one of `allow_paths`.
    `sequential`: True (or a dict overriding alpha, max_cases, batch, seed, zero_limit)
    runs `--sequential`, False the whole suite; None follows the contract's section.
    `call_cache`: as `--call-cache` (None: `$DECFLOW_CALL_CACHE`, else the contract's)."""
    from pydantic import ValidationError

    from decflow.contracts.sections import Sequential
    from decflow.pipeline.contract_run.cache_mode import call_cache_mode, derived_order_seed
    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec, load_contract_cached
    from decflow.store.runs import new_run_id
    from decflow.store.store import open_store
    from decflow.views.stored import write_run_html

    opened = open_store(store)
    spec = RunSpec(
        contract_path=str(contract), store_url=opened.url, run_id=new_run_id(),
        mode=mode,
        backend=backend, dataset=dataset, seed=seed,
        properties=tuple(properties) if properties else None, minimize=minimize,
        max_concurrency=max_concurrency, healthcheck=check_health,
        allow_paths=tuple(allow_paths),
        call_cache=call_cache_mode(call_cache, load_contract_cached(str(contract)).contract),
    )
    try:
        settings = Sequential.settings(
            load_contract_cached(str(contract)).contract.sequential,
            None if sequential is None else bool(sequential),
            sequential if isinstance(sequential, dict) else {}, derived_order_seed(spec))
    except ValidationError as exc:
        error = exc.errors()[0]
        raise DecflowError(f"sequential.{error['loc'][0]}: {error['msg']}") from None
    # (after the rest: the order seed may derive from the spec's contract, dataset and mode)
    spec = replace(spec, sequential=settings)
    report = run_contract(spec, opened, fail_on_warn=fail_on_warn)
    write_run_html(opened, report)
    return report


def run_check(contract: str | Path, records: str, *, baseline: str | None = None,
              store: str | None = None, fail_on_warn: bool = False) -> dict[str, Any]:
    """`decflow check`: the production check report dict (stored as a run in `store`,
    default `$DECFLOW_STORE`, else `.decflow`)."""
    from decflow.pipeline.production.run import run_check as check
    from decflow.store.store import open_store
    from decflow.views.stored import write_run_html

    opened = open_store(store)
    report = check(str(contract), records, baseline, fail_on_warn=fail_on_warn, store=opened)
    write_run_html(opened, report)
    return report


def run_diff(baseline: str, candidate: str, *, contract: str | None = None,
             segment_by: list[str] | None = None, store: str | None = None,
             fail_on_warn: bool = False, noise_reruns: int = 0) -> dict[str, Any]:
    """`decflow diff`: the regression diff report dict (`baseline="accepted"` supported);
    `noise_reruns` as `--noise-reruns K`. Its `evidence` section holds the gating rule, the
    rerun noise and each gate's interval and verdict; `headline` leads with the decision."""
    from decflow.pipeline.regression import run_diff as diff
    from decflow.store.store import open_store

    return diff(baseline, candidate, open_store(store), contract_path=contract,
                segment_by=segment_by, fail_on_warn=fail_on_warn, noise_reruns=noise_reruns)


def typed_report(report: dict[str, Any]) -> Report:
    """A report dict (from `run_test`, `run_check`, `run_diff`, or a report file's JSON) as
    the typed model the views and re-gate read: `RunReport`, `CheckReport` or `DiffReport`,
    `Report` for other kinds. Attributes are checked by a type checker (`report.status`,
    `report.checks[0].gate`); `to_dict()` gives the same JSON back. A malformed report
    raises one `ReportError` naming each bad field."""
    from decflow.report.check_report import CheckReport
    from decflow.report.diff_report import DiffReport
    from decflow.report.model import Report
    from decflow.report.run_report import RunReport
    from decflow.report.sections import report_kind

    models: dict[str, type[Report]] = {"run": RunReport, "check": CheckReport,
                                       "diff": DiffReport}
    return models.get(report_kind(report), Report).read(report, "the report")


def render_text(report: dict[str, Any]) -> str:
    """The terminal view of any report dict (run, diff, check, probe), as the CLI prints it."""
    from decflow.views.outputs import render_text as render

    return render(report)


def parse_input(text: str, as_json: bool) -> str | dict[str, Any]:
    """The INPUT argument of `decflow run`: text, or a JSON object with `--input-json`."""
    if not as_json:
        return text
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise DecflowError(f"INPUT: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DecflowError("INPUT: --input-json needs a JSON object")
    return value
