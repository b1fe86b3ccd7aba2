"""The backend interface shared by every provider and the call engine.

A backend answers one decision request with raw label probabilities keyed by the labels
*as shown* (presentation order and surface form). The call engine (`backends.engine`)
validates the answer, maps shown labels back to contract labels, reorders to canonical
order and picks the argmax; backends never do that themselves.

Two ways to answer:
- `predict(request)` (async): one request; used by remote backends through the engine's
  bounded-concurrency loop.
- `predict_batch(requests)` (sync): in-process backends (mock, Python callables) decide a
  whole shard at once; the engine prefers it when `supports_batch` is true.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

DecisionType = Literal["choice", "noul", "score"]
HealthStatus = Literal["ok", "unhealthy", "unknown"]

ERROR_KINDS = (
    "timeout",
    "unavailable",
    "invalid_response",
    "backend_error",
    "exception",
    "paraphrase_error",
    "original_error",
)


@dataclass(frozen=True, slots=True)
class DecisionSpec:
    """The decision as presented: labels in the order and surface form shown to the model."""

    name: str
    type: DecisionType
    labels: tuple[str, ...]
    description: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    case_id: str
    decision: DecisionSpec
    input: str | dict[str, Any]


@dataclass(slots=True)
class Prediction:
    """A backend's answer: probabilities keyed by the shown labels, exactly as returned."""

    probabilities: Mapping[str, Any]
    model: str | None = None
    model_version: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Health:
    status: HealthStatus
    detail: str


class BackendError(Exception):
    """A per-case failure; `kind` is the typed error kind recorded for the case."""

    kind = "backend_error"


class BackendTimeout(BackendError):
    kind = "timeout"


class BackendUnavailable(BackendError):
    kind = "unavailable"


class InvalidResponse(BackendError):
    kind = "invalid_response"


@dataclass(slots=True)
class BatchOutcome:
    """One entry per request of a batch: a prediction or the per-case error."""

    prediction: Prediction | None = None
    error: BackendError | None = None
    latency_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """A configured backend. `name` is the contract name (`default` or a `backends` key)."""

    provider: str = ""
    supports_batch: bool = False

    def __init__(self, name: str, model: str | None) -> None:
        self.name = name
        self.model = model

    @abstractmethod
    async def predict(self, request: DecisionRequest) -> Prediction:
        """Decide one request (remote backends)."""

    def predict_batch(self, requests: Sequence[DecisionRequest]) -> list[BatchOutcome]:
        """Decide a shard in one call (in-process backends set `supports_batch = True`)."""
        raise NotImplementedError

    async def healthcheck(self) -> Health:
        return Health("unknown", "no health_url configured")

    def details(self) -> dict[str, Any]:
        """Provider details stored in reports (never credentials)."""
        return {}

    async def aclose(self) -> None:
        """Release clients and connections."""
