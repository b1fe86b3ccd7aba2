"""The work a contract-run command prepares while its backend is called (`commands.ahead`):
started at the calls' first answer, never before; joined when the call stage ends, so no
later stage runs beside it; left undone when no call was answered."""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Any, cast

import polars as pl

from decflow.commands.ahead import SWITCH_INTERVAL_S, Ahead
from decflow.pipeline.stage import Progress, ProgressFactory


def _factory(seen: list[tuple[str, int]]) -> ProgressFactory:
    def make(name: str, _total: int | None) -> Progress:
        return lambda done, _total_now: seen.append((name, done))

    return make


def test_the_work_starts_at_the_first_answer_and_ends_with_the_call_stage() -> None:
    started = threading.Event()
    release = threading.Event()
    intervals: list[float] = []
    priorities: list[int] = []

    def work() -> None:
        intervals.append(sys.getswitchinterval())
        if sys.platform.startswith("linux"):  # the thread's own priority, not the process's
            priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        started.set()
        release.wait(10)

    before = sys.getswitchinterval()
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if sys.platform.startswith(
        "linux") else 0
    ahead = Ahead(work)
    seen: list[tuple[str, int]] = []
    progress = ahead.progress(_factory(seen))
    progress("records", 5)(3, 5)  # another stage's progress starts nothing
    calls = progress("calls", 4)
    calls(0, 4)  # nothing answered yet
    assert ahead.thread is None
    calls(1, 4)
    assert started.wait(10)
    calls(2, 4)  # one thread, however many answers
    thread = ahead.thread
    assert thread is not None and thread.is_alive()
    ahead.on_stage("requests", None)  # another stage's end does not wait
    assert thread.is_alive()
    release.set()
    ahead.on_stage("results", None)
    assert not thread.is_alive()
    assert seen == [("records", 3), ("calls", 0), ("calls", 1), ("calls", 2)]
    assert intervals == [SWITCH_INTERVAL_S]
    if sys.platform.startswith("linux"):
        # never below the event loop's: a lowered thread that a busy machine keeps off the
        # CPU keeps the interpreter too, and the loop waits for it (priority inversion)
        assert priorities == [own]
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own
    assert sys.getswitchinterval() == before


def test_without_an_answer_nothing_runs_and_a_failure_is_left_to_the_user() -> None:
    ran: list[str] = []
    idle = Ahead(lambda: ran.append("work"))
    idle.on_stage("results", None)
    idle.join()
    assert ran == [] and idle.thread is None

    def fails() -> None:
        ran.append("failed")
        raise ImportError("no such view")

    failing = Ahead(fails)
    failing.progress(_factory([]))("calls", 1)(1, 1)
    failing.join()  # the error is not raised here: the import fails again where it is used
    assert ran == ["failed"]


def test_the_originals_chunks_stored_reach_the_work_until_the_calls_end(tmp_path: Any) -> None:
    from decflow.commands.ahead import Chunks, written_chunks
    from decflow.pipeline.contract_run.results import CallSession, chunk_readers
    from decflow.store.store import open_store

    store = open_store(str(tmp_path / "store"))
    frame = pl.DataFrame({"request_id": ["c1", "c2"]})
    session = CallSession(cast(Any, None), frame)
    chunks: Chunks = queue.SimpleQueue()
    read: list[tuple[str, list[str]]] = []

    def work() -> None:
        for part, chunk in iter(chunks.get, None):
            read.append((part.path.rsplit("/", 1)[-1], chunk["request_id"].to_list()))

    ahead = Ahead(work, chunks)
    with written_chunks(chunks):
        session.wrote(store.write_part("r/chunk-o000000-a-00000.parquet", frame), frame)
        ahead.progress(_factory([]))("calls", 2)(1, 2)
        # a transformed request's chunk is not the originals'
        session.wrote(store.write_part("r/chunk-t000000-a-00000.parquet", frame), frame)
        session.wrote(store.write_part("r/chunk-o000001-a-00000.parquet", frame.head(1)),
                      frame.head(1))
        for _ in range(1000):  # till the thread took both
            if len(read) == 2:
                break
            time.sleep(0.01)
        ahead.on_stage("results", None)
    assert ahead.thread is not None and not ahead.thread.is_alive()
    assert read == [("chunk-o000000-a-00000.parquet", ["c1", "c2"]),
                    ("chunk-o000001-a-00000.parquet", ["c1"])]
    assert chunk_readers == []  # none left once the run is over
    session.wrote(store.write_part("r/chunk-o000002-a-00000.parquet", frame), frame)
    assert chunks.empty()
    # what the thread has not taken when the calls end is left (to the summary)
    idle = Ahead(work, chunks)
    with written_chunks(chunks):
        session.wrote(store.write_part("r/chunk-o000003-a-00000.parquet", frame), frame)
        idle.join()
    assert chunks.get_nowait() is None and chunks.empty()
