"""A backend's run plan, stored with the run (`runs/<run_id>/backend-plan.json`).

Some backends decide before the first call how the whole run reads answers (the `openai`
backend: which tokenizer answered, each label's first pieces, the echo check). Call shards
may run in other processes (Prefect tasks, Dask workers) that build the backend anew, so the
plan is made once, when the requests stage checks the presentations, stored with the run,
and adopted by every backend built to call for the run. A resumed run keeps the plan its
earlier results were read with. The model requests the plan took are recorded beside it
(`runs/<run_id>/plan-requests.json`, not copied with the plan: a run continuing another
sent none) and counted in the run's requests sent (`call_cache.cache_section`).
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


def plan_requests_path(run_id: str) -> str:
    return run_path(run_id, "plan-requests.json")


def plan_requests(store: Store, run_id: str) -> int:
    """The model requests this run's plan took (0 when it took none or was inherited)."""
    relative = plan_requests_path(run_id)
    return int(store.read_json(relative)["requests_sent"]) if store.exists(relative) else 0


def stored_plan(store: Store, run_id: str) -> dict[str, Any] | None:
    relative = plan_path(run_id)
    return store.read_json(relative) if store.exists(relative) else None


def prepare(backend: Backend, store: Store, run_id: str,
            presentations: Sequence[Sequence[str]]) -> None:
    """Let the backend refuse or plan the run's presentations; store its plan."""
    plan = backend.prepare_run(presentations)
    if backend.plan_requests:
        store.write_json(plan_requests_path(run_id), {"requests_sent": backend.plan_requests})
    if plan is not None:
        store.write_json(plan_path(run_id), plan)


def run_backend(contract: Contract, backend_name: str, store: Store, run_id: str) -> Backend:
    """The backend, built to call for run `run_id` (its stored plan adopted)."""
    backend = build_backend(contract, backend_name)
    plan = stored_plan(store, run_id)
    if plan is not None:
        backend.use_plan(plan)
    return backend
