"""The `nightly_regression` flow: run the contract against its backend, diff the run
against the accepted baseline for its decision and backend (`decflow runs accept RUN`),
publish artifacts, and fail the flow run when the run or the diff is FAIL."""

from __future__ import annotations

from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from decflow.flows.common import fail_on_status
from decflow.flows.contract_run import decision_name, run_stages
from decflow.pipeline.spec import RunSpec
from decflow.store.runs import accepted_run, new_run_id
from decflow.store.store import Store
from decflow.tasks.regression import diff_task
from decflow.tasks.report import artifact_key, report_task


def _nightly_run_name() -> str:
    params = flow_run.parameters
    return (f"{decision_name(params['contract'])}-{params.get('mode', 'test')}-"
            f"{params.get('backend', 'default')}-nightly")


def no_baseline_note(decision: str, backend: str, run_id: str, store: str) -> str:
    return (
        f"# No accepted baseline\n\nThere is no accepted baseline run for decision "
        f"`{decision}` and backend `{backend}` in the store `{store}`, so this run was not "
        f"diffed.\n\nIf run `{run_id}` is good, accept it as the baseline:\n\n"
        f"```\ndecflow runs accept {run_id} --store {store}\n```\n"
    )


@flow(name="nightly_regression", flow_run_name=_nightly_run_name, persist_result=False)
def nightly_regression(
    contract: str,
    backend: str = "default",
    mode: Literal["test", "fuzz", "all"] = "test",
    store: str = ".decflow",
    dataset: str | None = None,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Returns `{"run": <run outcome>, "diff": <diff outcome or None>, "baseline": id|None}`
    (outcomes: run id, status, exit code and the store path of the report)."""
    logger = get_run_logger()
    spec = RunSpec(contract_path=contract, store_url=store, run_id=new_run_id(),
                   mode=mode, backend=backend, dataset=dataset)
    run = run_stages(spec, fail_on_warn=fail_on_warn)
    decision = decision_name(contract)
    baseline = accepted_run(Store(store), decision, backend)
    diff = None
    if baseline is None:
        logger.warning("no accepted baseline for decision %s and backend %s; accept this run "
                       "with `decflow runs accept %s --store %s`", decision, backend,
                       spec.run_id, store)
        create_markdown_artifact(
            no_baseline_note(decision, backend, spec.run_id, store),
            key=artifact_key(decision, backend, "regression"),
            description="nightly regression: no accepted baseline",
        )
    else:
        diff = diff_task(baseline, spec.run_id, contract, store, fail_on_warn)
        report_task.with_options(name="diff-report")(
            store, diff["report"], artifact_key(decision, backend, "regression")
        )
        logger.info("diff %s → %s: %s", baseline, spec.run_id, diff["status"])
    fail_on_status(run, f"run {spec.run_id}")
    if diff is not None:
        fail_on_status(diff, f"regression diff {baseline} → {spec.run_id}")
    return {"run": run, "diff": diff, "baseline": baseline}
