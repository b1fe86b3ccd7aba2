"""Task settings (no server): Prefect caching and persistence off everywhere, shard retries
only for failures a retry can change."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.orchestration


def all_tasks() -> list[object]:
    from prefect import Task

    from decflow.tasks import check, report, stages

    return [value for module in (stages, check, report) for value in vars(module).values()
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
