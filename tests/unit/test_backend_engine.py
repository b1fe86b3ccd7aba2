"""The call engine's results table: one row per request, errors nulled, decided rows kept
exactly (a polars release that blanked them would turn a verdict into NaN metrics); its
workers start one per turn of the loop, so the first request goes out before the last
worker has started, and every request is taken once, in order; chunks handed to a writer
thread are each written and recorded once, in order, and a write's error fails the run."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np
import polars as pl
import pytest

from decflow.backends import engine
from decflow.backends.base import Backend, DecisionRequest, DecisionSpec, Prediction
from decflow.backends.engine import (
    WAITING_CHUNKS,
    ChunkWrites,
    RemoteCaller,
    _rows_from_matrix,
)
from decflow.errors import DecflowError

OK = [0.1, 0.2, 0.7]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_decided_rows_keep_their_probabilities_among_errors(order: tuple[int, ...]) -> None:
    rows = [("c1", None, "invalid_response", 5.0), ("c3", OK, None, 6.0),
            ("c2", None, "timeout", 7.0)]
    rows = [rows[i] for i in order]
    matrix = np.array([r[1] if r[1] else [np.nan] * 3 for r in rows])
    frame = _rows_from_matrix([r[0] for r in rows], matrix, ["refund", "reject", "review"],
                              [r[3] for r in rows], [r[2] for r in rows],
                              ["m" if r[2] else None for r in rows], "model", None, None)
    by_id = {row["request_id"]: row for row in frame.to_dicts()}
    assert by_id["c3"]["probabilities"] == OK
    assert (by_id["c3"]["selected"], by_id["c3"]["confidence"]) == ("review", 0.7)
    assert by_id["c3"]["latency_ms"] == 6.0 and by_id["c3"]["error_kind"] is None
    for errored in ("c1", "c2"):
        assert by_id[errored]["probabilities"] is None and by_id[errored]["selected"] is None


class _Recording(Backend):
    """Answers every request after a turn of the loop (as a request written to a socket
    waits for its answer), recording when each call began and when it was sent."""

    provider = "recording"

    def __init__(self) -> None:
        super().__init__("default", "m")
        self.events: list[tuple[str, str, object]] = []

    async def predict(self, request: DecisionRequest) -> Prediction:
        self.events.append(("call", request.case_id, request.input))
        await asyncio.sleep(0)  # connecting
        self.events.append(("sent", request.case_id, request.input))
        await asyncio.sleep(0.001)
        return Prediction({label: 1 / 3 for label in request.decision.labels})


def _requests(n: int) -> pl.DataFrame:
    labels = ["refund", "reject", "review"]
    return pl.DataFrame({
        "request_id": [f"r{i:04d}" for i in range(n)],
        "input_text": [None if i % 3 == 0 else f"text {i}" for i in range(n)],
        "input_json": [json.dumps({"n": i}) if i % 3 == 0 else None for i in range(n)],
        "shown_labels": [labels] * n,
        "label_order": [[0, 1, 2]] * n,
    })


def _call(backend: Backend, requests: pl.DataFrame, concurrency: int) -> pl.DataFrame:
    caller = RemoteCaller(backend, DecisionSpec("d", "choice", ("refund", "reject", "review")),
                          1e-6, concurrency)
    chunks: list[pl.DataFrame] = []
    asyncio.run(caller.run(requests, ["refund", "reject", "review"], chunks.append))
    return pl.concat(chunks)


def test_the_first_request_goes_out_before_the_last_worker_starts() -> None:
    backend = _Recording()
    _call(backend, _requests(16), concurrency=8)
    kinds = [kind for kind, _, _ in backend.events]
    calls = [index for index, kind in enumerate(kinds) if kind == "call"]
    # all eight started at once: eight calls, then their sends
    assert kinds.index("sent") < calls[7]


def test_every_request_is_taken_once_in_order_across_slices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "ROWS_PER_SLICE", 7)
    backend = _Recording()
    requests = _requests(50)
    results = _call(backend, requests, concurrency=4)
    taken = [(case_id, value) for kind, case_id, value in backend.events if kind == "call"]
    assert taken == [(f"r{i:04d}", {"n": i} if i % 3 == 0 else f"text {i}") for i in range(50)]
    assert sorted(results["request_id"].to_list()) == requests["request_id"].to_list()
    assert results["error_kind"].null_count() == 50


def test_requests_answered_before_the_run_are_recorded_and_only_the_rest_called() -> None:
    """`answered` (a run's first wave): a row already there is recorded as it is, one still
    in flight on another thread's loop once it arrives, one whose call was cancelled
    (None) is called again; no other answered request is called."""
    backend = _Recording()
    requests = _requests(12)
    done: Future[tuple[Any, ...] | None] = Future()
    done.set_result(("r0000", [0.5, 0.25, 0.25], 1.0, None, None, "early", None, None))
    late: Future[tuple[Any, ...] | None] = Future()
    cancelled: Future[tuple[Any, ...] | None] = Future()
    cancelled.set_result(None)
    threading.Timer(0.05, late.set_result, [
        ("r0002", [0.25, 0.5, 0.25], 2.0, None, None, "early", None, None)]).start()
    caller = RemoteCaller(backend, DecisionSpec("d", "choice", ("refund", "reject", "review")),
                          1e-6, 4)
    chunks: list[pl.DataFrame] = []
    asyncio.run(caller.run(requests, ["refund", "reject", "review"], chunks.append,
                           answered={"r0000": done, "r0002": late, "r0003": cancelled}))
    results = pl.concat(chunks).sort("request_id")
    called = [case_id for kind, case_id, _ in backend.events if kind == "call"]
    assert called == [f"r{i:04d}" for i in range(12) if i not in (0, 2)]
    assert results["request_id"].to_list() == requests["request_id"].to_list()
    early = results.filter(pl.col("model") == "early")
    assert early["request_id"].to_list() == ["r0000", "r0002"]
    assert early["probabilities"].to_list() == [[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]


class _Written:
    """A `write_chunk` that writes slowly (each chunk a little slower or faster than the one
    before), in whatever thread calls it, and records on the caller's thread; the chunk
    numbered `failing` fails to be written."""

    def __init__(self, failing: int | None = None) -> None:
        self.failing = failing
        self.written: list[tuple[int, str]] = []  # chunk number, writing thread
        self.recorded: list[tuple[list[str], str]] = []  # request ids, recording thread

    def __call__(self, frame: pl.DataFrame) -> Callable[[], None]:
        number = len(self.written)
        time.sleep(0.004 if number % 2 else 0.001)
        self.written.append((number, threading.current_thread().name))
        if number == self.failing:
            raise DecflowError(f"cannot write chunk {number}: disk full")
        ids = frame["request_id"].to_list()

        def record() -> None:
            self.recorded.append((ids, threading.current_thread().name))

        return record


def _written_run(written: _Written, results: list[str], n: int, chunk_size: int = 3) -> None:
    """n requests, 4 in flight, their chunks written by `written`."""
    caller = RemoteCaller(_Recording(), DecisionSpec("d", "choice", ("refund", "reject", "review")),
                          1e-6, 4)
    asyncio.run(caller.run(_requests(n), ["refund", "reject", "review"], _unused,
                           chunk_size=chunk_size, on_result=lambda row: results.append(row[0]),
                           write_chunk=written))


def _unused(frame: pl.DataFrame) -> None:
    raise AssertionError("chunks go to write_chunk")


def test_chunks_are_written_off_the_loop_and_recorded_on_it_each_once_in_order() -> None:
    written = _Written()
    results: list[str] = []
    _written_run(written, results, 50)
    loop_thread = threading.main_thread().name
    # every chunk written in another thread, one after the other, and recorded (by the time
    # the run returns) in the thread of the loop, in the order the results were finished
    assert [number for number, _ in written.written] == list(range(17))
    assert all(thread != loop_thread for _, thread in written.written)
    assert [thread for _, thread in written.recorded] == [loop_thread] * 17
    recorded = [i for ids, _ in written.recorded for i in ids]
    assert recorded == results and sorted(recorded) == [f"r{i:04d}" for i in range(50)]
    assert [len(ids) for ids, _ in written.recorded] == [3] * 16 + [2]


def test_a_backend_faster_than_the_writer_waits_for_it() -> None:
    # the backend answers at once and each chunk takes 1-4 ms to write: however many rows
    # the run has, no more than WAITING_CHUNKS chunks are handed over and not yet written
    written = _Written()
    results: list[str] = []
    waiting: list[int] = []
    flush = ChunkWrites.flush

    def flush_counted(self: ChunkWrites) -> None:
        flush(self)
        waiting.append(sum(not chunk.done() for chunk in self.pending))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChunkWrites, "flush", flush_counted)
        _written_run(written, results, 600)
    assert len(written.written) == 200 and len(results) == 600
    assert max(waiting) <= WAITING_CHUNKS


def test_the_chunk_left_for_after_the_last_answer_holds_at_most_the_requests_in_flight(
) -> None:
    # 150 requests, 4 in flight, chunks of 100: once the last request is sent, the rows
    # finished since the first chunk are written as one, and the last chunk holds only
    # what was still in flight then (not the 50 rows a full-size chunking leaves)
    written = _Written()
    results: list[str] = []
    _written_run(written, results, 150, chunk_size=100)
    sizes = [len(ids) for ids, _ in written.recorded]
    assert sizes[0] == 100 and sum(sizes) == 150 and len(sizes) == 3
    assert 0 < sizes[2] <= 4
    assert [i for ids, _ in written.recorded for i in ids] == results


def test_a_run_with_no_more_rows_than_requests_in_flight_writes_one_chunk() -> None:
    written = _Written()
    results: list[str] = []
    _written_run(written, results, 6, chunk_size=100)
    assert [len(ids) for ids, _ in written.recorded] == [6]


def test_a_chunk_that_cannot_be_written_fails_the_run_with_its_error() -> None:
    written = _Written(failing=1)
    results: list[str] = []
    with pytest.raises(DecflowError, match="cannot write chunk 1: disk full"):
        _written_run(written, results, 50)
    # the chunk before it is recorded, none after it; and once the run has failed, no
    # chunk is being written behind its back
    assert [ids for ids, _ in written.recorded] == [results[:3]]
    assert [number for number, _ in written.written][:2] == [0, 1]
    count = len(written.written)
    time.sleep(0.02)
    assert len(written.written) == count
