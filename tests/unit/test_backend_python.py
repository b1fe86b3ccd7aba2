"""CallableBackend through the engine: return shapes, threads, error kinds."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import polars as pl
import pytest

from decflow.backends.base import (
    BackendTimeout,
    DecisionRequest,
    DecisionSpec,
    InvalidResponse,
    Prediction,
)
from decflow.backends.engine import RemoteCaller
from decflow.backends.python import CallableBackend

SPEC = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"))


def through_engine(backend: CallableBackend, shown: list[str] | None = None) -> dict[str, Any]:
    """One request through the shared call engine; returns its result row."""
    shown = shown or list(SPEC.labels)
    requests = pl.DataFrame({
        "request_id": ["r1"], "input_text": ["The blender broke."], "input_json": [None],
        "shown_labels": [shown], "label_order": [[SPEC.labels.index(s) for s in shown]],
    }, schema_overrides={"input_json": pl.String})
    chunks: list[pl.DataFrame] = []
    caller = RemoteCaller(backend, SPEC, tolerance=0.001, max_concurrency=4)
    asyncio.run(caller.run(requests, SPEC.labels, chunks.append))
    return pl.concat(chunks).row(0, named=True)


def test_mapping_prediction_and_label_answers() -> None:
    row = through_engine(CallableBackend(lambda r: {"refund": 0.6, "reject": 0.3, "review": 0.1}))
    assert row["probabilities"] == [0.6, 0.3, 0.1] and row["selected"] == "refund"
    assert row["error_kind"] is None

    def full(request: DecisionRequest) -> Prediction:
        return Prediction({"refund": 0.2, "reject": 0.7, "review": 0.1}, "m", "v2", {"k": 1})

    row = through_engine(CallableBackend(full, model="fallback"))
    assert (row["selected"], row["model"], row["model_version"]) == ("reject", "m", "v2")

    row = through_engine(CallableBackend(lambda r: "review", model="rules"),
                         shown=["review", "refund", "reject"])
    assert row["probabilities"] == [0.0, 0.0, 1.0] and row["model"] == "rules"


def test_sync_functions_run_off_the_event_loop_and_async_ones_are_awaited() -> None:
    seen: list[str] = []

    def sync(request: DecisionRequest) -> str:
        seen.append(threading.current_thread().name)
        return "refund"

    async def coroutine(request: DecisionRequest) -> str:
        await asyncio.sleep(0)
        return "reject"

    assert through_engine(CallableBackend(sync))["selected"] == "refund"
    assert seen and seen[0] != threading.main_thread().name
    assert through_engine(CallableBackend(coroutine))["selected"] == "reject"


@pytest.mark.parametrize(
    ("fn", "kind", "message"),
    [
        (lambda r: (_ for _ in ()).throw(RuntimeError("boom")), "exception", "RuntimeError: boom"),
        (lambda r: (_ for _ in ()).throw(BackendTimeout("slow")), "timeout", "slow"),
        (lambda r: "maybe", "invalid_response", "'maybe', not a shown label"),
        (lambda r: 0.5, "invalid_response", "returned float"),
        (lambda r: {"refund": 1.0}, "invalid_response", "missing labels"),
    ],
)
def test_error_kinds(fn: Any, kind: str, message: str) -> None:
    row = through_engine(CallableBackend(fn))
    assert row["error_kind"] == kind
    assert message in row["error_message"]


def test_direct_predict_and_provider() -> None:
    backend = CallableBackend(lambda r: "refund")
    assert (backend.provider, backend.name, backend.model) == ("python", "python", None)
    prediction = asyncio.run(backend.predict(DecisionRequest("c", SPEC, "x")))
    assert prediction.probabilities == {"refund": 1.0, "reject": 0.0, "review": 0.0}
    with pytest.raises(InvalidResponse):
        asyncio.run(CallableBackend(lambda r: None).predict(DecisionRequest("c", SPEC, "x")))
