"""Task settings (no server): Prefect caching and persistence off everywhere, shard retries
only for failures a retry can change."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.orchestration


def all_tasks() -> list[object]:
    from prefect import Task

    from decflow.tasks import production, regression, replay, report, stages

    modules = (stages, production, regression, replay, report)
    found = [value for module in modules for value in vars(module).values()]
    return [value for value in [*found, *stages.STAGE_TASKS.values()]
            if isinstance(value, Task)]


def test_every_task_has_prefect_caching_and_persistence_off() -> None:
    from prefect.cache_policies import NO_CACHE

    tasks = all_tasks()
    names = {t.name for t in tasks}  # type: ignore[attr-defined]
    assert {"cases", "requests", "results-health", "results-shard", "results-check-originals",
            "results", "comparisons", "minimized", "summary", "report", "records-plan", "records",
            "aggregates", "diff", "replay"} == names
    for task in tasks:
        assert task.cache_policy is NO_CACHE, task  # type: ignore[attr-defined]
        assert task.persist_result is False, task  # type: ignore[attr-defined]


def test_only_shards_retry() -> None:
    retrying = {t.name: t.retries for t in all_tasks() if t.retries}  # type: ignore[attr-defined]
    assert retrying == {"results-shard": 2}


def test_shard_retries_skip_failures_a_retry_cannot_change() -> None:
    from prefect.states import Failed

    from decflow.errors import DecflowError
    from decflow.tasks.common import transient

    assert transient(None, None, Failed(data=OSError("connection reset")))  # type: ignore[arg-type]
    assert not transient(None, None, Failed(data=DecflowError("bad contract")))  # type: ignore[arg-type]


def test_artifact_keys_are_valid_prefect_keys() -> None:
    from decflow.tasks.report import artifact_key

    assert artifact_key("refund_request-all-default") == "refund-request-all-default"
    assert artifact_key("Spam Filter", "B/2") == "spam-filter-b-2"


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
    assert not quiet.filter(record(GateFailed("run x: FAIL (exit 1); see its artifacts")))
    user_error = record(DecflowError("bad contract"))
    assert quiet.filter(user_error) and user_error.exc_info is None
    crash = record(RuntimeError("bug"))
    assert quiet.filter(crash) and crash.exc_info is not None


def test_a_failed_verdict_ends_the_flow_failed_with_one_line() -> None:
    from decflow.flows.common import GateFailed, failure, finish

    outcome = {"status": "pass", "exit_code": 0}
    assert finish(outcome, failure(outcome, "run a")) is outcome
    failed = {"status": "fail", "exit_code": 1}
    state = finish(outcome, failure(failed, "run b"), failure(failed, "diff a → b"))
    assert state.is_failed()  # type: ignore[union-attr]
    assert state.message == ("run b: FAIL (exit 1); see its artifacts; "  # type: ignore[union-attr]
                             "diff a → b: FAIL (exit 1); see its artifacts")
    assert "\n" not in state.message  # type: ignore[union-attr]
    with pytest.raises(GateFailed, match="run b: FAIL"):
        state.result()  # type: ignore[union-attr]
