"""The `nightly_regression` flow: run the contract against its backend, diff the run
against the accepted baseline for its decision and backend (`decflow runs accept RUN`),
publish artifacts, and end the flow run Failed when the run or the diff is FAIL, its state
message led by the headline naming the failing gates (the diff's first).

A night that could not diff is not green: with no accepted baseline yet the nightly's own
verdict is `WARN (not diffed: no accepted baseline for <decision>/<backend>; accept one
with decflow runs accept RUN)` — its state message, `verdict:warn` tag and regression
artifact say so, and `fail_on_warn` fails it — while the decflow run keeps its own status,
so a passing one can be accepted without `--force`. A baseline that ran another mode than
the nightly (a `test` baseline under an `all` nightly) is named in the diff's line."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import MarkdownArtifact, TableArtifact
from prefect.runtime import flow_run

from decflow.flows.common import Verdict, decflow_run, finish, retried_run_id, task_value
from decflow.flows.contract_run import continued_run, decision_name
from decflow.flows.stage_loop import stopped_message
from decflow.gates.headline import Qualifier
from decflow.pipeline.contract_run.call_cache import call_cache_mode, fresh_answers_mode
from decflow.pipeline.contract_run.runner import CONTRACT_RUN
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.store.runs import accepted_run, new_run_id, read_run_record
from decflow.store.store import Store
from decflow.tasks.regression import diff_task, noise_task
from decflow.tasks.report import artifact_key, publish, report_task
from decflow.views.artifacts import placeholder_rows


def _nightly_run_name() -> str:
    params = flow_run.parameters
    return (f"{decision_name(params['contract'])}-{params.get('mode', 'test')}-"
            f"{params.get('backend', 'default')}-nightly")


def baseline_advice(run: dict[str, Any], contract: str, backend: str, store: str) -> str:
    """What to do without a baseline: accept this run only if it passed."""
    accept = f"decflow runs accept {run['run_id']} --store {store}"
    if run["status"] == "pass":
        return f"if its answers are the ones to keep, accept it as the baseline: `{accept}`"
    return (f"it is {run['status'].upper()}, so it should not become the baseline: fix the "
            f"backend or the contract, run again (this deployment, or `decflow test {contract} "
            f"-b {backend} --store {store}`) and accept a run that passes with "
            f"`decflow runs accept RUN_ID --store {store}`")


def not_diffed(decision: str, backend: str) -> str:
    """The nightly's headline when it had nothing to diff against (PRODUCT §4 grammar: the
    status and its qualifier; no gate was judged)."""
    detail = (f"no accepted baseline for {decision}/{backend}; accept one with decflow runs "
              "accept RUN")
    return f"WARN {Qualifier('not diffed', detail)}"


def no_baseline_note(decision: str, backend: str, run: dict[str, Any], advice: str,
                     store: str) -> str:
    return (
        f"# Not diffed: no accepted baseline\n\nThere is no accepted baseline run for decision "
        f"`{decision}` and backend `{backend}` in the store `{store}`, so run "
        f"`{run['run_id']}` ({run['status'].upper()}) was not diffed: this night is WARN "
        f"until a baseline is accepted.\n\nWhat to do: {advice}.\n"
    )


def mode_note(store: Store, baseline: str, mode: str) -> str:
    """` (baseline mode test, nightly mode all)` when the modes differ, else nothing."""
    theirs = read_run_record(store, baseline).get("mode")
    return "" if theirs in (None, mode) else f" (baseline mode {theirs}, nightly mode {mode})"


@flow(name="nightly_regression", flow_run_name=_nightly_run_name, persist_result=False)
def nightly_regression(
    contract: str,
    backend: str = "default",
    mode: Literal["test", "fuzz", "all"] = "test",
    store: str = ".decflow",
    dataset: str | None = None,
    fail_on_warn: bool = False,
    noise_reruns: int = 2,
) -> Any:
    """The diff attributes flips against the candidate's rerun noise: its stability reruns,
    else a noise run re-sending its requests `noise_reruns` times (0: none; flip and TV gates
    of an evidence-gated diff are then not established).

    Returns `{"run": <run outcome>, "diff": <diff outcome or None>, "baseline": id|None}`
    (outcomes: run id, status, exit code, headline and the store path of the report); when
    the run or the diff is FAIL (or WARN, with `fail_on_warn`: a night without a baseline
    is one) the flow run ends Failed and a Python caller gets `GateFailed`. The regression
    result (the diff, or the note that there is no baseline) is always published under the
    same key."""
    logger = get_run_logger()
    # a retried flow run continues the decflow run its earlier attempt started
    spec = RunSpec(contract_path=contract, store_url=store,
                   run_id=retried_run_id() or new_run_id(), mode=mode, backend=backend,
                   dataset=dataset)
    decision = decision_name(contract)
    with decflow_run(spec.run_id, _nightly_run_name(), stopped_message(CONTRACT_RUN, spec)):
        # the candidate measures the model as it answers tonight: never served from the cache
        spec = replace(spec, call_cache=fresh_answers_mode(
            call_cache_mode(None, load_contract_cached(contract).contract)))
        run = continued_run(spec, fail_on_warn=fail_on_warn)
        ran = Verdict(run, f"run {spec.run_id}")
        key = artifact_key(decision, backend, "regression")
        opened = Store(store)
        baseline = accepted_run(opened, decision, backend)
        if baseline is None:
            advice = baseline_advice(run, contract, backend, store)
            logger.warning("no accepted baseline for decision %s and backend %s; %s",
                           decision, backend, advice)
            line = not_diffed(decision, backend)
            publish(MarkdownArtifact(markdown=no_baseline_note(decision, backend, run, advice,
                                                               store),
                                     key=key, description=line))
            publish(TableArtifact(table=placeholder_rows(line), key=f"{key}-checks",
                                  description=line))
            night = Verdict({"status": "warn", "headline": line})
            return finish({"run": run, "diff": None, "baseline": None}, ran, night,
                          fail_on_warn=fail_on_warn)
        subject = (f"regression diff {baseline} → {spec.run_id}"
                   f"{mode_note(opened, baseline, mode)}")
        noise_task(spec.run_id, store, noise_reruns)  # the re-sends, with their progress
        diff = task_value(diff_task(baseline, spec.run_id, contract, store, fail_on_warn,
                                    noise_reruns, return_state=True))
        report_task.with_options(task_run_name="report: publish the regression diff")(
            store, diff["report"], key)
        return finish({"run": run, "diff": diff, "baseline": baseline}, ran,
                      Verdict(diff, subject), fail_on_warn=fail_on_warn)
