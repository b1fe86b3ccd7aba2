"""The signal handler of the command line (`decflow.interrupts`): an interruption is never
lost, whether it lands in plain code, on an event loop whose code catches every exception,
or where Python drops exceptions (a `__del__`)."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from decflow import interrupts
from decflow.errors import Interrupted
from decflow.pipeline.production.workers import in_parallel


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in interrupts.SIGNALS}
    monkeypatch.setattr(interrupts, "_received", None)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    interrupts.install()
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_in_plain_code_the_signal_raises_at_once() -> None:
    with pytest.raises(Interrupted) as caught:
        signal.raise_signal(signal.SIGTERM)
    assert caught.value.signum == signal.SIGTERM


def test_on_a_loop_code_that_catches_everything_cannot_swallow_the_signal() -> None:
    """The signal lands inside code that catches BaseException (as asyncio's transport
    write does): nothing is raised there, the main task is cancelled at its next await,
    its cleanup runs, and `Interrupted` comes out of the loop."""
    seen: list[str] = []

    async def main() -> None:
        try:
            try:
                signal.raise_signal(signal.SIGINT)
            except BaseException as exc:  # what the transport write does
                seen.append(f"caught {type(exc).__name__}")
            assert interrupts.stopping()
            seen.append("went on")
            await asyncio.sleep(30)
            seen.append("slept")
        finally:
            seen.append("cleaned up")

    started = time.monotonic()
    with pytest.raises(Interrupted) as caught:
        interrupts.run(main())
    assert caught.value.signum == signal.SIGINT
    assert seen == ["went on", "cleaned up"]
    assert time.monotonic() - started < 5


def test_a_signal_as_the_task_finishes_still_stops() -> None:
    async def main() -> str:
        signal.raise_signal(signal.SIGINT)
        return "done"

    with pytest.raises(Interrupted):
        interrupts.run(main())


def test_the_loops_other_tasks_are_cancelled_and_finished() -> None:
    finished: list[str] = []

    async def worker(name: str) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            finished.append(name)

    async def main() -> None:
        workers = [asyncio.ensure_future(worker(name)) for name in ("a", "b")]
        await asyncio.sleep(0)
        assert not any(task.done() for task in workers)
        signal.raise_signal(signal.SIGTERM)
        await asyncio.sleep(30)

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(Interrupted):
            interrupts.run_until_complete(loop, main())
        assert sorted(finished) == ["a", "b"]
        assert not asyncio.all_tasks(loop)
    finally:
        loop.close()


class _SlowFinalizer:
    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)


def test_a_signal_python_drops_is_raised_at_the_next_safe_point(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Python ignores what a `__del__` raises ("Exception ignored in …"): the recorded
    signal is raised again by `check` (and before the next loop), and nothing is printed."""
    finalizer = _SlowFinalizer()
    del finalizer
    gc.collect()
    assert capsys.readouterr().err == ""
    with pytest.raises(Interrupted):
        interrupts.check()

    async def never() -> None:
        raise AssertionError("a loop started after the signal")

    with pytest.raises(Interrupted):
        interrupts.run(never())


def test_cleanup_runs_to_its_end_after_a_signal() -> None:
    """While an exception unwinds, `check` raises nothing (a `finally` block is not cut
    short), and a loop run there runs."""
    cleaned: list[str] = []

    async def close() -> None:
        cleaned.append("closed")

    with pytest.raises(Interrupted):
        try:
            signal.raise_signal(signal.SIGINT)
        finally:
            interrupts.check()
            interrupts.run(close())
    assert cleaned == ["closed"]


def signal_another_thread(signum: int, after_s: float) -> threading.Event:
    """Deliver `signum` to a thread other than the main one after `after_s` (the kernel may
    pick any thread for a signal sent to the process); set the returned event to end it."""
    done = threading.Event()

    def bystander() -> None:
        done.wait(60)

    thread = threading.Thread(target=bystander, daemon=True)
    thread.start()
    assert thread.ident is not None
    ident = thread.ident
    threading.Timer(after_s, lambda: signal.pthread_kill(ident, signum)).start()
    return done


def test_a_loop_hears_a_signal_another_thread_received() -> None:
    async def main() -> None:
        await asyncio.sleep(30)

    done = signal_another_thread(signal.SIGTERM, 0.2)
    started = time.monotonic()
    try:
        with pytest.raises(Interrupted) as caught:
            interrupts.run(main())
    finally:
        done.set()
    assert caught.value.signum == signal.SIGTERM
    assert time.monotonic() - started < 3


def test_waiting_for_workers_hears_a_signal_another_thread_received() -> None:
    """The main thread waits for a pool's threads (a check reading its records): a signal
    the kernel gives to another thread is seen within a slice, and the items not started
    are never run."""
    release = threading.Event()
    ran: list[int] = []

    def slow(item: int) -> int:
        ran.append(item)
        release.wait(60)
        return item

    done = signal_another_thread(signal.SIGINT, 0.2)
    started = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            list(in_parallel(slow, list(range(8)), processes=False))
        waited = time.monotonic() - started
    finally:
        release.set()
        done.set()
    assert waited < 3
    time.sleep(0.2)
    assert len(ran) < 8
