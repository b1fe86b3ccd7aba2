"""The worker's side of a worker process: read calls, run each as a task on one event
loop, answer each with its result or its failure.

The first frame carries the parent's trusted import path (`command.trusted_path`), so the
worker finds the plugins the parent would find and nothing in the working directory.
Every `BaseException` a call raises, `SystemExit` and `KeyboardInterrupt` included, is
answered as a failure of that call; Ctrl-C is the parent's to handle (ignored here). When
the parent goes away (the pipe closes) the worker ends at once, even with a call hung.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from decflow.workers.frames import BrokenFrame, encode, read_frame, write_encoded
from decflow.workers.lifetime import die_with_parent


class Handler(Protocol):
    def handle(self, op: str, args: dict[str, Any]) -> Any:
        """The result of `op` (a JSON-able value, or an awaitable of one)."""

    def failure(self, exc: BaseException) -> dict[str, Any]:
        """What the parent needs to know of a call's failure (`type`, `message`, …)."""


def exception_text(exc: BaseException) -> str:
    """`Type: message`, even for an exception whose `__str__` fails."""
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__ must not end the worker
        text = "(the exception could not be shown)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _use_path(message: dict[str, Any] | None) -> None:
    path = message.get("path") if message else None
    if isinstance(path, list) and all(isinstance(entry, str) for entry in path):
        sys.path[:] = [*path, *(entry for entry in sys.path if entry not in path)]


def serve(handler: Handler, argv: Sequence[str]) -> None:
    """Answer calls read from fd `argv[0]` on fd `argv[1]` until the parent closes."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests_fd, answers_fd = int(argv[0]), int(argv[1])
    _use_path(read_frame(requests_fd))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    write_lock = threading.Lock()

    def answer(message: dict[str, Any]) -> None:
        try:
            frame = encode(message)
        except BrokenFrame as exc:
            frame = encode({"id": message["id"], "error": {"type": "BrokenFrame",
                                                           "message": str(exc)}})
        with write_lock:
            write_encoded(answers_fd, frame)

    async def run(call: dict[str, Any]) -> None:
        try:
            result = handler.handle(str(call.get("op")), call.get("args") or {})
            if inspect.isawaitable(result):
                result = await result
            reply: dict[str, Any] = {"id": call.get("id"), "ok": result}
        except BaseException as exc:  # every failure, SystemExit too, is the call's answer
            reply = {"id": call.get("id"), "error": handler.failure(exc)}
        answer(reply)

    running: set[asyncio.Task[None]] = set()  # a task nobody references may be collected

    def start(call: dict[str, Any]) -> None:
        task = loop.create_task(run(call))
        running.add(task)
        task.add_done_callback(running.discard)

    def read() -> None:
        try:
            while (call := read_frame(requests_fd)) is not None:
                loop.call_soon_threadsafe(start, call)
        finally:
            os._exit(0)  # the parent is gone (or unreadable): nobody waits for an answer

    threading.Thread(target=read, name="decflow-worker-reader", daemon=True).start()
    while True:
        try:
            loop.run_forever()
        except BaseException:  # plugin code scheduled outside a call ended the loop
            continue
