"""`CallableBackend`: a Python function as a backend (library use only; contracts never
name Python code).

The function gets the `DecisionRequest` and returns a mapping label → probability, a
`Prediction`, or one label as a string (probability 1 for it, 0 for the others). Plain
functions run in a daemon thread per call (`decflow.workers.threads`), coroutine
functions are awaited; either way a call gets `timeout` seconds (`DECFLOW_CALL_TIMEOUT`,
120 by default) before it is recorded as `timeout` (a plain function's thread is
abandoned). `BackendError` subclasses become their kind, a `DecflowError` stops the run,
anything else (`SystemExit` and `KeyboardInterrupt` included) is `exception`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from decflow.backends.base import (
    Backend,
    BackendError,
    BackendTimeout,
    DecisionRequest,
    InvalidResponse,
    Prediction,
    ReportedFailure,
)
from decflow.errors import DecflowError
from decflow.workers.settings import call_timeout
from decflow.workers.threads import CallRaised, CallTimedOut, await_in_thread

Decider = Callable[[DecisionRequest], Any]


def reraised(exc: CallRaised) -> Exception:
    """What a callable's failure raises for the engine: decflow's and backend errors as
    they are, anything else as an `exception` case naming the original type."""
    original = exc.original
    if isinstance(original, BackendError | DecflowError):
        return original
    return ReportedFailure("exception", str(exc))


class CallableBackend(Backend):
    provider = "python"

    def __init__(self, fn: Decider, name: str = "python", model: str | None = None,
                 timeout: float | None = None) -> None:
        super().__init__(name, model)
        self.fn = fn
        self.timeout = call_timeout(timeout)

    async def predict(self, request: DecisionRequest) -> Prediction:
        try:
            if inspect.iscoroutinefunction(self.fn):
                answer = await asyncio.wait_for(self._awaited(self.fn(request)), self.timeout)
            else:
                answer = await await_in_thread(self.fn, request, timeout=self.timeout)
                if inspect.isawaitable(answer):
                    answer = await asyncio.wait_for(self._awaited(answer), self.timeout)
        except CallRaised as exc:
            raise reraised(exc) from None
        except (CallTimedOut, TimeoutError):
            raise BackendTimeout(f"the function did not answer within {self.timeout:g}s") from None
        return self._prediction(answer, request)

    @staticmethod
    async def _awaited(awaitable: Any) -> Any:
        try:
            return await awaitable
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit too
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise CallRaised(exc) from None

    def _prediction(self, answer: Any, request: DecisionRequest) -> Prediction:
        if isinstance(answer, Prediction):
            return answer
        if isinstance(answer, Mapping):
            return Prediction(dict(answer), model=self.model)
        labels = request.decision.labels
        if isinstance(answer, str):
            if answer not in labels:
                raise InvalidResponse(f"the function returned {answer!r}, not a shown label")
            return Prediction({label: float(label == answer) for label in labels}, self.model)
        raise InvalidResponse(
            f"the function returned {type(answer).__name__}; expected a mapping label → "
            "probability, a Prediction or a label"
        )

    def details(self) -> dict[str, Any]:
        fn = self.fn
        return {"callable": f"{fn.__module__}.{getattr(fn, '__qualname__', type(fn).__name__)}"}
