"""A `Backend` object handed to the SDK, run on an event loop in a daemon thread of its own.

Its calls get `timeout` seconds each (`DECFLOW_CALL_TIMEOUT`, 120 by default): past it the
case is `timeout` and the loop, which may be stuck in the object's code, is abandoned
with its thread; later calls get a fresh one. Whatever the object raises comes back as a
typed case error (`decflow.backends.python.reraised`), `SystemExit` and
`KeyboardInterrupt` included; a real Ctrl-C still interrupts the main thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from decflow.backends.base import (
    Backend,
    BackendError,
    BackendTimeout,
    BatchAnswer,
    DecisionRequest,
    Health,
    Prediction,
    RequestBatch,
)
from decflow.backends.python import reraised
from decflow.workers.settings import call_timeout
from decflow.workers.threads import CallRaised, CallTimedOut, call_in_thread

T = TypeVar("T")


class ThreadedBackend(Backend):
    def __init__(self, inner: Backend, timeout: float | None = None) -> None:
        super().__init__(inner.name, inner.model)
        self.inner = inner
        self.provider = inner.provider
        self.supports_batch = inner.supports_batch
        self.timeout = call_timeout(timeout)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="decflow-backend", daemon=True).start()
            self._loop = loop
        return self._loop

    async def _on_loop(self, call: Callable[[], Awaitable[T]]) -> T:
        async def guarded() -> tuple[bool, Any]:
            try:
                return True, await call()
            except BaseException as exc:  # every way out of the object's code is an answer
                return False, exc

        future = asyncio.run_coroutine_threadsafe(guarded(), self._running_loop())
        try:
            ok, value = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError:
            self._loop = None  # abandoned: it may be stuck in the object's code
            raise BackendTimeout(f"backend '{self.name}' did not answer within "
                                 f"{self.timeout:g}s") from None
        if not ok:
            raise reraised(CallRaised(value))
        return cast(T, value)

    def _in_thread(self, call: Callable[..., T], *args: Any) -> T:
        try:
            return call_in_thread(call, *args, timeout=self.timeout)
        except CallRaised as exc:
            raise reraised(exc) from None
        except CallTimedOut:
            raise BackendTimeout(f"backend '{self.name}' did not answer within "
                                 f"{self.timeout:g}s") from None

    async def predict(self, request: DecisionRequest) -> Prediction:
        return await self._on_loop(lambda: self.inner.predict(request))

    async def healthcheck(self) -> Health:
        return await self._on_loop(self.inner.healthcheck)

    async def aclose(self) -> None:
        if self._loop is not None:
            await self._on_loop(self.inner.aclose)

    def decide_batch(self, batch: RequestBatch) -> BatchAnswer:
        try:
            return self._in_thread(self.inner.decide_batch, batch)
        except BackendError as exc:
            import numpy as np

            rows, width = batch.label_orders.shape
            return BatchAnswer(np.zeros((rows, width)), [exc.kind] * rows, [str(exc)] * rows)

    def makes_plans(self) -> bool:
        return self.inner.makes_plans()

    def prepare_run(self, presentations: Sequence[Sequence[str]]) -> dict[str, Any] | None:
        plan = self._in_thread(self.inner.prepare_run, presentations)
        self.plan_requests = self.inner.plan_requests
        return plan

    def use_plan(self, plan: Mapping[str, Any]) -> None:
        self._in_thread(self.inner.use_plan, plan)

    def details(self) -> dict[str, Any]:
        return self._in_thread(self.inner.details)
