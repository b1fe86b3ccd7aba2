"""How SIGINT and SIGTERM stop a command: promptly, and never lost inside a library.

The command line installs `handle` for both signals before it imports anything else
(`install`). The handler records the signal for the whole process, then:

- in plain code it raises `Interrupted` at once (a polars query, a store write);
- while an event loop runs in the main thread (`run`, `run_until_complete`) nothing is
  raised: what runs on a loop may catch a `BaseException` and carry on (asyncio's
  transport write reports it as a "Fatal write error" and the run kept calling; a task
  keeps it as its result; a backend's coroutine may catch it). The loop takes the signal
  itself (`loop.add_signal_handler`) and cancels its main task; the engine starts no
  request once a signal is recorded (`stopping`), the task unwinds through its `finally`
  blocks (finished results recorded, connections closed), and `Interrupted` is raised
  once the loop returns. A second signal during that cleanup cancels the cleanup.

CPython runs signal handlers in the main thread, but the kernel may deliver a signal to
any thread (polars', Arrow's, a pool's), and a main thread blocked on a lock, a thread or
a pipe then sleeps on until the other side is done (a Ctrl-C during a 4M-record check
took 37 s to be seen). So the main thread waits for other threads and processes in slices
(`result`, `join`, `communicate`), and an event loop wakes through its own signal pipe.

Python drops an exception raised where nothing can receive it (a `__del__` method or a
weakref callback the garbage collector runs: "Exception ignored in …"). So the recorded
signal is raised again at the next safe point (`check`: before each stage, each shard of
calls, each unit of records, each loop) and the dropped one is not printed
(`sys.unraisablehook`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from decflow.errors import Interrupted

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# How long the main thread sleeps on another thread or process before it looks for a
# signal (see the module docstring).
SLICE_S = 0.1

_received: int | None = None  # the first signal this process received (once installed)


class _LoopStop:
    """A loop run in the main thread: the signal received while it ran, what to cancel."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.signum: int | None = None
        self.target: asyncio.Future[Any] | None = None

    def request(self, signum: int) -> None:
        """Called by the loop, between two of its callbacks."""
        _record(signum, None)
        if self.signum is None:
            self.signum = signum
        if self.target is not None:
            self.target.cancel()


def _record(signum: int, _frame: object) -> None:
    global _received
    if _received is None:
        _received = signum


def handle(signum: int, _frame: object) -> None:
    """The handler of SIGINT and SIGTERM (see the module docstring).

    Raises nothing while an interruption is already unwinding: a library that catches
    Ctrl-C itself (polars inside a query) raises KeyboardInterrupt, and this handler then
    runs for the same signal at the next bytecode, often the entry of the run's cleanup;
    raising there would skip the cleanup (the run left unrecorded, its message without the
    run id)."""
    _record(signum, _frame)
    if isinstance(sys.exc_info()[1], KeyboardInterrupt | Interrupted):
        return
    raise Interrupted(signum)


def _unraisable(hook: Any) -> Any:
    def drop_interrupted(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):  # `check` raises it again
            hook(unraisable)

    return drop_interrupted


def install() -> None:
    """Make `handle` the handler of SIGINT and SIGTERM (the command line, first thing)."""
    for signum in SIGNALS:
        signal.signal(signum, handle)
    sys.unraisablehook = _unraisable(sys.__unraisablehook__)


def exiting() -> None:
    """From here on a signal ends the process at once with 128 + signum: the command is
    done, and what remains (exit handlers stopping worker processes, Prefect draining its
    workers) is not worth waiting for once someone asks to stop."""
    for signum in SIGNALS:
        signal.signal(signum, _exit_now)


def _exit_now(signum: int, _frame: object) -> None:
    os._exit(128 + signum)


def stopping() -> bool:
    """Whether a signal asked this process to stop (no new work is started)."""
    return _received is not None


def result(future: Future[T], timeout: float | None = None) -> T:
    """`future.result(timeout)`, waited for in slices (see the module docstring)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
        try:
            return future.result(max(left, 0.0))
        except FutureTimeout:
            if deadline is not None and time.monotonic() >= deadline:
                raise


def join(thread: threading.Thread) -> None:
    """`thread.join()`, waited for in slices (see the module docstring)."""
    while thread.is_alive():
        thread.join(SLICE_S)


def communicate(child: subprocess.Popen[bytes]) -> bytes:
    """What `child` writes to its stdout until it ends, waited for in slices."""
    while True:
        try:
            out, _ = child.communicate(timeout=SLICE_S)
            return out or b""
        except subprocess.TimeoutExpired:
            continue


def check() -> None:
    """A safe point between two pieces of work: raise `Interrupted` if a signal arrived
    whose exception was lost (see the module docstring). Not while an exception unwinds:
    cleanup runs to its end."""
    if _received is not None and sys.exc_info()[1] is None:
        raise Interrupted(_received)


def run_until_complete(loop: asyncio.AbstractEventLoop,
                       main: Coroutine[Any, Any, T]) -> T:
    """`loop.run_until_complete(main)` that a signal stops as the module docstring says.
    Interrupted, the loop's other tasks are cancelled and finished before `Interrupted`
    is raised, so the loop can be closed or used again."""
    try:
        check()
    except Interrupted:
        main.close()  # never started
        raise
    return _guarded(loop, main)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` that a signal stops as the module docstring says; the loop is
    shut down (tasks, async generators, the default executor) under the same rule."""
    loop = asyncio.new_event_loop()
    try:
        return run_until_complete(loop, main)
    finally:
        try:
            _guarded(loop, _shutdown(loop))
        finally:
            loop.close()


def _guarded(loop: asyncio.AbstractEventLoop, main: Coroutine[Any, Any, T]) -> T:
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not handle):
        # signals are handled in the main thread only, and by decflow's handler only on
        # the command line (a script using the SDK keeps its own)
        return loop.run_until_complete(main)
    stop = _LoopStop(loop)
    earlier = _received
    for signum in SIGNALS:
        loop.add_signal_handler(signum, stop.request, signum)
        # the loop hears of it through its signal pipe; until it does, `stopping` knows
        signal.signal(signum, _record)
    try:
        task: asyncio.Task[T] = loop.create_task(main)
        stop.target = task
        try:
            value = loop.run_until_complete(task)
        except BaseException as exc:
            stopped = stop.signum or (_received if earlier is None else None)
            if stopped is None:
                raise
            _finish_others(stop)
            raise Interrupted(stopped) from (
                None if isinstance(exc, asyncio.CancelledError) else exc)
        if earlier is None and _received is not None:  # as the task finished: still a stop
            _finish_others(stop)
            raise Interrupted(_received)
        return value
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)
            signal.signal(signum, handle)


def _finish_others(stop: _LoopStop) -> None:
    """Cancel the loop's remaining tasks and let them unwind; a further signal cancels
    the wait (the process is on its way out)."""
    loop = stop.loop
    others = asyncio.all_tasks(loop)
    if not others:
        return
    for task in others:
        task.cancel()
    gathered = stop.target = asyncio.gather(*others, return_exceptions=True)
    with contextlib.suppress(asyncio.CancelledError):
        loop.run_until_complete(gathered)


async def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    others = asyncio.all_tasks(loop) - {asyncio.current_task()}
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
