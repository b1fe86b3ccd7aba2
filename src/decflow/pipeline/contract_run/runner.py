"""The contract-run pipeline (`CONTRACT_RUN`): cases → requests → results (→ comparisons →
minimized when the mode judges properties) → summary, which stores the report.
`run_contract` drives it in this process through the one driver (`pipeline/driver.py`);
the Prefect flow (`decflow.flows.contract_run`) runs the same pipeline through the
generic stage loop. Both record the run under `runs/<run_id>/`, so either can resume,
re-gate or diff the other's runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from decflow.pipeline.contract_run.backend_plan import plan_path, stored_plan
from decflow.pipeline.contract_run.call_stage import RESULTS
from decflow.pipeline.contract_run.first_wave import FirstWave
from decflow.pipeline.contract_run.inputs import CASES, REQUESTS
from decflow.pipeline.contract_run.later_stages import COMPARISONS, MINIMIZED, SUMMARY
from decflow.pipeline.contract_run.resume import answered, forget_calls
from decflow.pipeline.driver import drive
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stage import ProgressFactory
from decflow.store.store import Manifest, Store


def describe_run(spec: RunSpec, manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    """What a contract run's record says of it besides the driver's fields."""
    return {"dataset_hash": manifests["cases"].extra["hash"] if "cases" in manifests else None,
            "backend": spec.backend, "mode": spec.mode}


def continue_plan(store: Store, spec: RunSpec) -> None:
    """A run continuing a finished one reads answers as its parent did."""
    if spec.parent:
        keep_plan(store, spec.parent, spec.run_id)


def answered_run(store: Store, manifests: Mapping[str, Manifest],
                 computing: Mapping[str, str] | None) -> bool:
    """Whether a new contract run stopped by an error is worth keeping: only once its
    backend answered (a mistyped -b or -d leaves no run); else its calls' folder goes
    (`resume.py`)."""
    key = computing["key"] if computing and computing["stage"] == RESULTS.name else None
    if RESULTS.name in manifests or answered(store, key):
        return True
    forget_calls(store, key)
    return False


CONTRACT_RUN: Pipeline[RunSpec] = Pipeline(
    "contract_run", f"{__name__}:CONTRACT_RUN", RunSpec.from_dict,
    (CASES, REQUESTS, RESULTS, COMPARISONS, MINIMIZED, SUMMARY),
    "decflow.report.run_report:RunReport", describe_run,
    prepare=continue_plan, kept=answered_run,
    aliases={"report": SUMMARY.name},  # `--from-stage report` recomputes the summary
)


def keep_plan(store: Store, parent: str, run_id: str) -> None:
    """A run continuing `parent` reads answers as its parent did (its backend plan)."""
    plan = stored_plan(store, parent)
    if plan is not None:
        store.write_json(plan_path(run_id), plan)


def run_contract(
    spec: RunSpec,
    store: Store,
    *,
    progress: ProgressFactory | None = None,
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    on_stage: Callable[[str, Manifest], None] | None = None,
    first_wave: FirstWave | None = None,
) -> dict[str, Any]:
    """Run (or resume) every stage of a contract run in this process; returns its report.
    `first_wave`: the run's first requests, already being sent (`first_wave.start`)."""
    return drive(CONTRACT_RUN, spec, store, from_stage=from_stage, on_stage=on_stage,
                 progress=progress, fail_on_warn=fail_on_warn,
                 outputs=first_wave.outputs() if first_wave is not None else {})
