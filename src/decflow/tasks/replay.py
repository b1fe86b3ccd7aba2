"""Replaying a stored run's property failures as a task of the `replay` flow."""

from __future__ import annotations

from typing import Any

from decflow.pipeline.stored.replay import replay_target
from decflow.store.store import Store
from decflow.tasks.common import stage_task


@stage_task("replay", "replay: re-send the stored failures of {target}")
def replay_task(
    target: str, store_url: str, ids: list[str], contract: str | None, backend: str | None,
    max_concurrency: int | None,
) -> dict[str, Any]:
    """Re-send a stored run's property failures (a report file or a run id in the store)."""
    return replay_target(target, Store(store_url), ids=ids, contract=contract, backend=backend,
                         max_concurrency=max_concurrency)
