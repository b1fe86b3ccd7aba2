"""Callables handed to the SDK as objects (a decision function, a probe agent, a backend
object) run in daemon threads of their own.

Whatever such a call raises, `SystemExit`, `KeyboardInterrupt` and `GeneratorExit`
included, comes back as `CallRaised` (the caller records an errored case; a real Ctrl-C
still reaches the main thread, which never runs the callable). A call that outlives its
timeout raises `CallTimedOut` and its thread is abandoned: Python cannot stop a thread, so
it runs on as a daemon until it returns or the process exits, and its answer is dropped.
Daemon threads, not an executor's: an executor joins its threads when the process or the
event loop shuts down, so one hung call would hang the exit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from decflow import interrupts

T = TypeVar("T")


class CallRaised(Exception):
    """The call raised `original` (any BaseException)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original


class CallTimedOut(Exception):
    """The call did not return within its timeout (its thread is abandoned)."""


def _started(fn: Callable[..., T], args: tuple[Any, ...]) -> Future[T]:
    future: Future[T] = Future()

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # every way out of the callable is its answer
            future.set_exception(CallRaised(exc))
        else:
            future.set_result(result)

    threading.Thread(target=run, name="decflow-callable", daemon=True).start()
    return future


def call_in_thread(fn: Callable[..., T], *args: Any, timeout: float) -> T:
    """`fn(*args)` in a daemon thread, waiting at most `timeout` seconds."""
    try:
        return interrupts.result(_started(fn, args), timeout)
    except FutureTimeout:
        raise CallTimedOut(f"no answer within {timeout:g}s") from None


async def await_in_thread(fn: Callable[..., T], *args: Any, timeout: float) -> T:
    """`call_in_thread` for an event loop: other calls run while this one waits."""
    try:
        return await asyncio.wait_for(asyncio.wrap_future(_started(fn, args)), timeout)
    except TimeoutError:
        raise CallTimedOut(f"no answer within {timeout:g}s") from None
