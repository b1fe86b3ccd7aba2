"""The regression diff as tasks of the nightly regression flow: the candidate's noise run
(its re-sends, with their own progress artifact), then the diff."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.client.schemas.objects import State

from decflow.pipeline.diff_evidence import candidate_noise
from decflow.pipeline.regression import run_diff
from decflow.redaction import redact
from decflow.store.runs import write_report
from decflow.store.store import Store
from decflow.tasks.common import judged, outcome, stage_task
from decflow.tasks.report import CallProgress


@stage_task("noise", "noise: re-send the requests of run {candidate_run} {noise_reruns} times")
def noise_task(candidate_run: str, store_url: str, noise_reruns: int) -> str | None:
    """The candidate's noise run (see `pipeline.diff_evidence.candidate_noise`), its calls
    counted by a progress artifact; returns its run id, None when none was needed."""
    progress: list[CallProgress] = []

    def factory(_stage: str, total: int | None) -> Callable[[int, int | None], None]:
        progress.append(CallProgress.start(total or 0, f"{candidate_run} (noise)"))
        return lambda done, _total: progress[-1].report(done)

    made = candidate_noise(Store(store_url), candidate_run, noise_reruns, factory)
    for found in progress:  # every re-send answered
        found.report(found.total, final=True)
    return made


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
