"""While remote calls are in flight the young generation is collected every 10,000
allocations, not 700; overlapping call runs put back what the first one found, once the
last ends, and a higher threshold (the command's start-up) is never lowered."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator

import polars as pl
import pytest

from decflow.backends.base import Backend, DecisionRequest, DecisionSpec, Prediction
from decflow.backends.engine import RemoteCaller
from decflow.collector import CALLS_THRESHOLD, calls_in_flight

LABELS = ("refund", "reject", "review")


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_the_threshold_is_raised_inside_and_restored_by_the_last_to_end() -> None:
    with calls_in_flight():
        assert gc.get_threshold() == (CALLS_THRESHOLD, 10, 10)
        with calls_in_flight():
            assert gc.get_threshold() == (CALLS_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (CALLS_THRESHOLD, 10, 10)  # the outer run still calls
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_runs_in_threads_restore_the_thresholds_found_first() -> None:
    inside = threading.Event()
    leave = threading.Event()

    def other_run() -> None:
        with calls_in_flight():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other_run)
    with calls_in_flight():
        thread.start()
        assert inside.wait(10)
    assert gc.get_threshold() == (CALLS_THRESHOLD, 10, 10)  # the thread's run is open
    leave.set()
    thread.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_stays() -> None:
    gc.set_threshold(1_000_000, 10, 10)
    with calls_in_flight():
        assert gc.get_threshold() == (1_000_000, 10, 10)
    assert gc.get_threshold() == (1_000_000, 10, 10)


class _Watching(Backend):
    """Records the first threshold at each call."""

    provider = "watching"

    def __init__(self) -> None:
        super().__init__("default", "m")
        self.seen: set[int] = set()

    async def predict(self, request: DecisionRequest) -> Prediction:
        self.seen.add(gc.get_threshold()[0])
        await asyncio.sleep(0)
        return Prediction({label: 1 / 3 for label in request.decision.labels})


def test_a_remote_run_calls_with_the_raised_threshold_and_restores_it() -> None:
    backend = _Watching()
    requests = pl.DataFrame({
        "request_id": [f"r{i}" for i in range(20)],
        "input_text": ["text"] * 20,
        "input_json": [None] * 20,
        "shown_labels": [list(LABELS)] * 20,
        "label_order": [[0, 1, 2]] * 20,
    }, schema_overrides={"input_json": pl.String})
    caller = RemoteCaller(backend, DecisionSpec("d", "choice", LABELS), 1e-6, 4)
    asyncio.run(caller.run(requests, list(LABELS), lambda frame: None))
    assert backend.seen == {CALLS_THRESHOLD}
    assert gc.get_threshold() == (700, 10, 10)
