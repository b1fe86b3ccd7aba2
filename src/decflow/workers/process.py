"""The parent's side of a worker process: calls with ids and timeouts, restarts, output.

A `WorkerProcess` runs `python -P -s -m MODULE` (its `serve` loop) and sends it calls;
each call is answered with a result, with the failure the call raised (`CallFailed`), or
not at all: when the worker dies (`sys.exit`, `os._exit`, a crash) every call in flight
fails with `WorkerFailed` kind `exception`; when a call outlives its timeout the worker is
stopped (it may be stuck for good), that call fails with kind `timeout` and the others in
flight with kind `exception`. The next call starts a fresh worker and first replays what
the instances living in it were set up with (`remember`); after `MAX_FAILURES` workers in
a row ended that way without a single answer, calls fail at once instead.

Three daemon threads serve each started worker: one writes calls (a stuck worker that
stops reading never blocks the caller), one reads answers, one forwards what the worker
prints to this process's stderr, a line at a time, escaped and cut, its credentials
redacted over the whole stream. A worker dies with this process (`lifetime`).
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import itertools
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from decflow import interrupts
from decflow.redaction import StreamRedactor
from decflow.untrusted import escape, shorten
from decflow.workers.command import python_module, trusted_path
from decflow.workers.frames import BrokenFrame, encode, read_frame, write_encoded
from decflow.workers.lifetime import child_environment, start_lasting

MAX_FAILURES = 3
# Starting a worker and building what it hosts (importing a plugin or an agent, polars
# with it) takes a second or more on a busy machine: that never counts against a call's
# timeout, and it gets at least this long.
SETUP_TIMEOUT_S = 30.0
MAX_OUTPUT_LINE = 2000
_STOP_WAIT_S = 5.0


class WorkerFailed(Exception):
    """A call got no answer: `kind` is `timeout` or `exception` (the worker ended)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class CallFailed(Exception):
    """The call ran in the worker and raised; `failure` is the worker's description."""

    def __init__(self, failure: dict[str, Any]) -> None:
        self.failure = failure if isinstance(failure, dict) else {}
        super().__init__(str(self.failure.get("message", "the call failed")))


def _settle(future: Future[Any], *, result: Any = None,
            error: BaseException | None = None) -> None:
    """Complete `future` unless it was cancelled or completed meanwhile (a caller that
    gave up on it)."""
    if future.done():
        return
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except Exception:  # lost a race with a cancellation: nobody is waiting for it
        return


def _ended(process: subprocess.Popen[bytes]) -> str:
    code = process.returncode
    if code is None:
        return "stopped answering"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


class _Child:
    """One started worker process and its threads."""

    def __init__(self, module: str, what: str, on_end: Callable[[_Child, bool], None]) -> None:
        self.what = what
        self.on_end = on_end
        self.pending: dict[int, Future[Any]] = {}
        self.lock = threading.Lock()
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.alive = True
        self.answered = False
        calls_read, calls_write = os.pipe()
        answers_read, answers_write = os.pipe()
        try:
            self.process = start_lasting(  # and it dies with this process (lifetime)
                python_module(module, str(calls_read), str(answers_write)),
                pass_fds=(calls_read, answers_write), env=child_environment(),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C on the terminal is the parent's
            )
        except OSError:
            for fd in (calls_read, calls_write, answers_read, answers_write):
                os.close(fd)
            raise
        os.close(calls_read)
        os.close(answers_write)
        self.calls_fd, self.answers_fd = calls_write, answers_read
        self.outbox.put(encode({"path": trusted_path()}))
        for target, name in ((self._write, "writer"), (self._read, "reader"),
                             (self._forward, "output")):
            threading.Thread(target=target, name=f"decflow-{name}", daemon=True).start()

    def submit(self, call_id: int, op: str, args: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            frame = encode({"id": call_id, "op": op, "args": args})
        except BrokenFrame as exc:
            _settle(future, error=WorkerFailed("exception", f"the call cannot be sent: {exc}"))
            return future
        with self.lock:
            if not self.alive:
                _settle(future, error=WorkerFailed("exception", f"{self.what} has stopped"))
                return future
            self.pending[call_id] = future
        self.outbox.put(frame)
        return future

    def _write(self) -> None:
        try:
            while (frame := self.outbox.get()) is not None:
                write_encoded(self.calls_fd, frame)
        except OSError:
            pass
        finally:
            os.close(self.calls_fd)

    def _read(self) -> None:
        reason = None
        try:
            while (message := read_frame(self.answers_fd)) is not None:
                with self.lock:
                    future = self.pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                    self.answered = True
                if future is None:
                    continue
                if "error" in message:
                    _settle(future, error=CallFailed(message["error"]))
                else:
                    _settle(future, result=message.get("ok"))
        except BrokenFrame as exc:
            reason = f"sent a broken message ({exc})"
        except OSError as exc:
            reason = f"could not be read ({exc.strerror or exc})"
        finally:
            os.close(self.answers_fd)
        self.end(reason)

    def _forward(self) -> None:
        """The worker's output, `MAX_OUTPUT_LINE` bytes at most a line, with credentials
        redacted over the whole stream (one cut across a token shows neither half)."""
        stream = self.process.stdout
        assert stream is not None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        redactor = StreamRedactor()
        while raw := stream.readline(MAX_OUTPUT_LINE):
            self._show(redactor.feed(decoder.decode(raw)))
        self._show(redactor.feed(decoder.decode(b"", final=True)) + redactor.end())
        stream.close()

    def _show(self, text: str) -> None:
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        for line in lines:
            try:
                sys.stderr.write(f"{self.what}: {shorten(escape(line), MAX_OUTPUT_LINE)}\n")
            except (OSError, ValueError):  # stderr closed: the worker's output is dropped
                return

    def end(self, reason: str | None, *, failed_call: int | None = None,
            deliberate: bool = False) -> None:
        """Stop the process (if it runs) and fail every call still waiting for it."""
        with self.lock:
            if not self.alive:
                return
            self.alive = False
            pending, self.pending = self.pending, {}
        self.outbox.put(None)
        if self.process.poll() is None:
            try:
                self.process.wait(0 if failed_call is not None or deliberate else _STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        why = reason or f"{self.what} {_ended(self.process)}"
        for call_id, future in pending.items():
            if call_id != failed_call:
                _settle(future, error=WorkerFailed("exception", f"{why} during the call"))
        self.on_end(self, deliberate)


class WorkerProcess:
    """Calls to code hosted by `python -m module`, started on the first call and again
    after it ended (see the module docstring)."""

    def __init__(self, module: str, what: str) -> None:
        self.module = module
        self.what = what
        self._child: _Child | None = None
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._setups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._failures = 0

    # -- what instances need replayed in a new worker ---------------------------------

    def remember(self, instance: str, op: str, args: dict[str, Any]) -> None:
        with self._lock:
            self._setups.setdefault(instance, []).append((op, args))

    def forget(self, instance: str) -> None:
        with self._lock:
            self._setups.pop(instance, None)

    # -- calls --------------------------------------------------------------------------

    def _on_end(self, child: _Child, deliberate: bool) -> None:
        with self._lock:
            if not deliberate and not child.answered:
                self._failures += 1
            elif child.answered:
                self._failures = 0
            if self._child is child:
                self._child = None

    def _running(self, timeout: float) -> _Child:
        timeout = max(timeout, SETUP_TIMEOUT_S)
        with self._lock:
            child = self._child
            if child is not None and child.alive:
                return child
            if self._failures >= MAX_FAILURES:
                raise WorkerFailed(
                    "exception",
                    f"{self.what} ended {self._failures} times in a row without answering; "
                    "it is not started again",
                )
            try:
                child = _Child(self.module, self.what, self._on_end)
            except OSError as exc:
                raise WorkerFailed(
                    "exception", f"{self.what} could not be started ({exc.strerror or exc})"
                ) from None
            self._child = child
            try:
                for setup_op, setup_args in [c for calls in self._setups.values() for c in calls]:
                    self._wait(child, child.submit(next(self._ids), setup_op, setup_args),
                               timeout)
            except CallFailed as exc:
                child.end(None, deliberate=True)
                raise WorkerFailed(
                    "exception", f"{self.what} could not be set up again: {exc}"
                ) from None
            child.answered = False  # a worker that only replayed its setups counts as silent
            return child

    def _wait(self, child: _Child, future: Future[Any], timeout: float) -> Any:
        try:
            return interrupts.result(future, timeout)
        except FutureTimeout:
            raise self._timed_out(child, future, timeout) from None

    def _timed_out(self, child: _Child, future: Future[Any], timeout: float) -> WorkerFailed:
        message = f"{self.what} did not answer within {timeout:g}s"
        with child.lock:
            call_id = next((i for i, f in child.pending.items() if f is future), None)
        child.end(f"{self.what} was stopped: another call took longer than {timeout:g}s",
                  failed_call=call_id)
        return WorkerFailed("timeout", message)

    def request(self, op: str, args: dict[str, Any], timeout: float) -> Any:
        """The result of one call, waiting at most `timeout` seconds for it."""
        child = self._running(timeout)
        return self._wait(child, child.submit(next(self._ids), op, args), timeout)

    def setup(self, instance: str, op: str, args: dict[str, Any], timeout: float) -> Any:
        """A call that builds what `instance` needs in the worker (loading a plugin or an
        agent), with the setup's time limit; replayed in every later worker."""
        timeout = max(timeout, SETUP_TIMEOUT_S)
        result = self.request(op, args, timeout)
        self.remember(instance, op, args)
        return result

    async def arequest(self, op: str, args: dict[str, Any], timeout: float) -> Any:
        """`request` for an event loop (other calls run meanwhile)."""
        child = self._running(timeout)
        future = child.submit(next(self._ids), op, args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            raise self._timed_out(child, future, timeout) from None

    def running(self) -> bool:
        """Whether a started worker is alive now."""
        child = self._child
        return child is not None and child.alive

    def stop(self) -> None:
        with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.end(f"{self.what} was stopped", deliberate=True)


_SHARED: dict[tuple[str, str], WorkerProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(module: str, key: str, what: str) -> WorkerProcess:
    """The one `WorkerProcess` of this process for (`module`, `key`); all are stopped when
    this process exits."""
    with _SHARED_LOCK:
        worker = _SHARED.get((module, key))
        if worker is None:
            worker = _SHARED[(module, key)] = WorkerProcess(module, what)
        return worker


@atexit.register
def _stop_all() -> None:
    with _SHARED_LOCK:
        workers = list(_SHARED.values())
    for worker in workers:
        worker.stop()
