"""Task settings (no server): Prefect caching and persistence off everywhere, shard retries
only for failures a retry can change."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.orchestration


def all_tasks() -> list[object]:
    from prefect import Task

    from decflow.pipeline.contract_run.runner import CONTRACT_RUN
    from decflow.pipeline.production.summary import CHECK
    from decflow.tasks import regression, replay, report, stages

    modules = (stages, regression, replay, report)
    found = [value for module in modules for value in vars(module).values()]
    pipelines = [stage for pipeline in (CONTRACT_RUN, CHECK) for stage in pipeline.stages]
    generic = [*(stages.task_of(s) for s in pipelines if not s.sharded),
               *(stages.unit_task_of(s) for s in pipelines if s.fan_out is not None)]
    return [value for value in [*found, *generic] if isinstance(value, Task)]


def test_every_task_has_prefect_caching_and_persistence_off() -> None:
    from prefect.cache_policies import NO_CACHE

    tasks = all_tasks()
    names = {t.name for t in tasks}  # type: ignore[attr-defined]
    assert {"cases", "requests", "results-health", "results-shard", "results-sequential",
            "results-check-originals", "results", "comparisons", "minimized", "summary", "report",
            "records-plan", "records", "aggregates", "noise", "diff", "replay"} == names
    for task in tasks:
        assert task.cache_policy is NO_CACHE, task  # type: ignore[attr-defined]
        assert task.persist_result is False, task  # type: ignore[attr-defined]


def test_only_shards_retry() -> None:
    retrying = {t.name: t.retries for t in all_tasks() if t.retries}  # type: ignore[attr-defined]
    # A sequential run's group of batches is its shard of calls.
    assert retrying == {"results-shard": 2, "results-sequential": 2}


def test_shard_retries_skip_failures_a_retry_cannot_change() -> None:
    from prefect.states import Failed

    from decflow.errors import DecflowError
    from decflow.tasks.common import transient

    assert transient(None, None, Failed(data=OSError("connection reset")))  # type: ignore[arg-type]
    assert not transient(None, None, Failed(data=DecflowError("bad contract")))  # type: ignore[arg-type]


def test_artifact_keys_are_valid_prefect_keys_and_name_where_a_run_comes_from() -> None:
    from decflow.tasks.report import artifact_key, slug

    assert slug("refund_request-all-default") == "refund-request-all-default"
    assert slug("Spam Filter", "B/2") == "spam-filter-b-2"
    # outside a deployment's run: a run started by hand
    assert artifact_key("refund_request", "order_sensitive", "all") == (
        "cli-refund-request-order-sensitive-all")


def test_every_task_run_is_named_after_its_stage_and_what_it_does() -> None:
    from decflow.tasks.stages import shard_run_name

    for task in all_tasks():
        name = task.task_run_name  # type: ignore[attr-defined]
        if callable(name):
            continue  # records units: a function of the unit (tested against the server)
        stage = task.name.split("-")[0]  # type: ignore[attr-defined]
        if task.name == "records-plan":  # type: ignore[attr-defined]
            stage = "records-plan"
        assert name.startswith(f"{stage}: "), (task, name)
    assert shard_run_name("transformed", 0, 3) == "results: call backend (transformed, shard 1/3)"


def test_a_reported_gate_failure_is_not_logged_again_with_a_traceback() -> None:
    import logging
    import sys

    from decflow.errors import DecflowError
    from decflow.flows.common import GateFailed
    from decflow.tasks.logs import QuietUserErrors

    def record(error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                                     "Engine execution exited with unexpected exception", (),
                                     sys.exc_info())

    quiet = QuietUserErrors()
    assert not quiet.filter(record(GateFailed("FAIL 1/2: max_ece 0.2 > 0.15")))
    user_error = record(DecflowError("bad contract"))
    assert quiet.filter(user_error) and user_error.exc_info is None
    crash = record(RuntimeError("bug"))
    assert quiet.filter(crash) and crash.exc_info is not None


def test_a_failed_verdict_ends_the_flow_failed_naming_the_failing_gates() -> None:
    from decflow.flows.common import GateFailed, Verdict, final_state, flow_result

    passed = {"status": "pass", "exit_code": 0, "headline": "PASS: 3/3 gates hold"}
    state = final_state(passed, Verdict(passed))
    assert state.is_completed() and state.message == "PASS: 3/3 gates hold"
    assert flow_result(state) is passed
    # --fail-on-warn sets the exit code only: a WARN run still completes
    warned = {"status": "warn", "exit_code": 1, "headline": "WARN 1/3: x 0.2 > 0.1 (warning)"}
    assert final_state(warned, Verdict(warned)).is_completed()
    failed = {"status": "fail", "exit_code": 1, "headline": "FAIL 1/3: max_ece 0.2 > 0.15"}
    result = {"run": passed, "diff": failed}
    state = final_state(result, Verdict(passed, "run b"), Verdict(failed, "regression diff a → b"))
    assert state.is_failed()
    # the headline first, then each report's verdict
    assert state.message == ("FAIL 1/3: max_ece 0.2 > 0.15\nrun b: PASS: 3/3 gates hold\n"
                             "regression diff a → b: FAIL 1/3: max_ece 0.2 > 0.15")
    with pytest.raises(GateFailed, match=r"max_ece 0\.2 > 0\.15"):
        state.result()
    assert flow_result(state) is result  # what the CLI reads the report from
    # a flow that fails on WARN (the nightly's fail_on_warn); a passing run's caveats
    night = {"status": "warn", "headline": "WARN (not diffed: no accepted baseline for d/b; "
             "accept one with decflow runs accept RUN)"}
    caveat = {**passed, "caveats": ["NOT EXERCISED (n/a, not a pass): paraphrase"]}
    state = final_state(result, Verdict(caveat, "run b"), Verdict(night), fail_on_warn=True)
    assert state.is_failed()
    assert state.message == (f"{night['headline']}\nrun b: PASS: 3/3 gates hold\n"
                             "NOT EXERCISED (n/a, not a pass): paraphrase")
    state = final_state(caveat, Verdict(caveat))
    assert state.is_completed()
    assert state.message == "PASS: 3/3 gates hold\nNOT EXERCISED (n/a, not a pass): paraphrase"


def test_the_judging_task_and_a_shard_whose_calls_all_failed_end_failed_not_retried(
) -> None:
    from prefect.client.schemas.objects import State
    from prefect.states import Failed

    from decflow.flows.common import task_value
    from decflow.tasks.common import judged, transient

    outcome = {"status": "fail", "headline": "FAIL 1/3: max_ece 0.2 > 0.15"}
    state = judged("fail", outcome["headline"], outcome)
    assert isinstance(state, State) and state.is_failed()
    assert state.message == outcome["headline"]
    assert task_value(state) is outcome
    assert judged("warn", "WARN 1/3: x", outcome) is outcome
    all_failed = Failed(message="every call of this shard failed (11 of 11)", data=11)
    assert task_value(all_failed) == 11
    assert not transient(None, None, all_failed)  # type: ignore[arg-type]
    with pytest.raises(OSError):
        task_value(Failed(data=OSError("connection reset")))


def test_the_report_location_maps_the_store_to_a_base_url(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decflow.store.store import Store
    from decflow.tasks.report import BASE_URL, report_location

    store = Store(str(tmp_path))
    html = "runs/20261201-000000-abcdef/report.html"
    monkeypatch.delenv(BASE_URL, raising=False)
    assert report_location(store, html) == f"{tmp_path}/{html}"  # a local path otherwise
    monkeypatch.setenv(BASE_URL, "https://reports.example.org/decflow/")
    assert report_location(store, html) == f"https://reports.example.org/decflow/{html}"
    monkeypatch.setenv(BASE_URL, "https://gw.example.org/get?key=store/{path}&sig=1")
    assert report_location(store, html) == f"https://gw.example.org/get?key=store/{html}&sig=1"
