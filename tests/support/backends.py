"""Driving a remote backend from a synchronous test: one event loop a call, closed after."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from decflow.backends.base import Backend, DecisionRequest, Prediction
from decflow.backends.http import HttpBackend
from decflow.backends.openai import OpenAIBackend

B = TypeVar("B", bound=Backend)
T = TypeVar("T")


def run(backend: B, work: Callable[[B], Awaitable[T]]) -> T:
    async def scenario() -> T:
        try:
            return await work(backend)
        finally:
            await backend.aclose()

    return asyncio.run(scenario())


def decide(
    backend: HttpBackend | OpenAIBackend, labels: tuple[str, ...] | None = None, text: Any = "x"
) -> Prediction:
    """Request `r1`: the backend's decision, its labels shown as `labels` when given."""
    spec = backend.decision if labels is None else replace(backend.decision, labels=labels)
    return run(backend, lambda b: b.predict(DecisionRequest("r1", spec, text)))
