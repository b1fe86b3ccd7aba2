"""`CallableBackend`: a Python function as a backend (library use only; contracts never
name Python code).

The function gets the `DecisionRequest` and returns a mapping label → probability, a
`Prediction`, or one label as a string (probability 1 for it, 0 for the others). Plain
functions run in a worker thread so they cannot stall the event loop; coroutine functions
are awaited. Exceptions pass through to the engine: `BackendError` subclasses become their
kind, anything else `exception`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from decflow.backends.base import Backend, DecisionRequest, InvalidResponse, Prediction

Decider = Callable[[DecisionRequest], Any]


class CallableBackend(Backend):
    provider = "python"

    def __init__(self, fn: Decider, name: str = "python", model: str | None = None) -> None:
        super().__init__(name, model)
        self.fn = fn

    async def predict(self, request: DecisionRequest) -> Prediction:
        if inspect.iscoroutinefunction(self.fn):
            answer = await self.fn(request)
        else:
            answer = await asyncio.to_thread(self.fn, request)
            if inspect.isawaitable(answer):
                answer = await answer
        return self._prediction(answer, request)

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
