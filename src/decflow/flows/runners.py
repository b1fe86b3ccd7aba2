"""Task runners: threads on this machine, or Dask for scale-out (`decflow[dask]`)."""

from __future__ import annotations

import importlib
from typing import Any

from prefect.settings import PREFECT_API_URL
from prefect.task_runners import ThreadPoolTaskRunner

from decflow.errors import DecflowError
from decflow.workers.command import spawn_isolated

# shards run one at a time under threads (the contract's max_concurrency bounds the calls
# to the backend); a few threads are enough for the stage tasks themselves
THREADS = 4


def build_task_runner(name: str = "thread", dask_address: str | None = None) -> Any:
    if name == "thread":
        return ThreadPoolTaskRunner(max_workers=THREADS)
    if name != "dask":
        raise DecflowError(f"--task-runner: '{name}' is not one of: thread, dask")
    try:
        # imported by name: the Dask extra is optional, and type checking never needs it
        runners = importlib.import_module("prefect_dask.task_runners")
    except ImportError:
        raise DecflowError(
            "--task-runner dask needs the Dask extra: pip install 'decflow[dask]'"
        ) from None
    if not PREFECT_API_URL.value():
        raise DecflowError(
            "--task-runner dask needs PREFECT_API_URL (a Prefect server every worker can "
            "reach); start one with `prefect server start`"
        )
    if dask_address:
        return runners.DaskTaskRunner(address=dask_address)
    return runners.DaskTaskRunner(cluster_class=isolated_local_cluster, cluster_kwargs={
        "n_workers": 2, "threads_per_worker": 1, "processes": True,
        "host": "127.0.0.1", "dashboard_address": None,
    })


def isolated_local_cluster(**kwargs: Any) -> Any:
    """A Dask `LocalCluster` whose worker processes start isolated from the working
    directory, like every child decflow starts (`decflow.workers.command`)."""
    local_cluster = importlib.import_module("distributed").LocalCluster

    with spawn_isolated():  # the constructor starts the workers and waits for them
        return local_cluster(**kwargs)
