"""The regression diff as a task of the nightly regression flow."""

from __future__ import annotations

from typing import Any

from prefect.client.schemas.objects import State

from decflow.pipeline.regression import run_diff
from decflow.redaction import redact
from decflow.store.runs import write_report
from decflow.store.store import Store
from decflow.tasks.common import judged, outcome, stage_task


@stage_task("diff", "diff: compare run {candidate_run} with baseline {baseline_run}")
def diff_task(
    baseline_run: str, candidate_run: str, contract: str, store_url: str,
    fail_on_warn: bool = False, noise_reruns: int = 0,
) -> dict[str, Any] | State[dict[str, Any]]:
    """The regression diff of two stored runs, written as `runs/<candidate>/diff.json`
    (after the candidate's noise run of `noise_reruns` re-sends, when it has no reruns);
    Failed with the headline when a requirement fails (`judged`)."""
    store = Store(store_url)
    diff = redact(run_diff(baseline_run, candidate_run, store, contract_path=contract,
                           fail_on_warn=fail_on_warn, noise_reruns=noise_reruns))
    found = outcome(diff, write_report(store, candidate_run, diff, "diff.json"))
    return judged(found["status"], found["headline"], found)
