"""A backend's run plan, stored with the run (`runs/<run_id>/backend-plan.json`).

Some backends decide before the first call how the whole run reads answers (the `openai`
backend: which tokenizer answered, each label's first pieces, the echo check). Call shards
may run in other processes (Prefect tasks, Dask workers) that build the backend anew, so the
plan is made once, when the requests stage checks the presentations, stored with the run,
and adopted by every backend built to call for the run. A resumed run keeps the plan its
earlier results were read with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from decflow.backends.base import Backend
from decflow.backends.registry import build_backend
from decflow.store.runs import run_path
from decflow.store.store import Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

def plan_path(run_id: str) -> str:
    return run_path(run_id, "backend-plan.json")


def stored_plan(store: Store, run_id: str) -> dict[str, Any] | None:
    relative = plan_path(run_id)
    return store.read_json(relative) if store.exists(relative) else None


def prepare(backend: Backend, store: Store, run_id: str,
            presentations: Sequence[Sequence[str]]) -> None:
    """Let the backend refuse or plan the run's presentations; store its plan."""
    plan = backend.prepare_run(presentations)
    if plan is not None:
        store.write_json(plan_path(run_id), plan)


def run_backend(contract: Contract, backend_name: str, store: Store, run_id: str) -> Backend:
    """The backend, built to call for run `run_id` (its stored plan adopted)."""
    backend = build_backend(contract, backend_name)
    plan = stored_plan(store, run_id)
    if plan is not None:
        backend.use_plan(plan)
    return backend
