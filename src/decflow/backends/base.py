"""The backend interface shared by every provider and the call engine.

A backend answers one decision request with raw label probabilities keyed by the labels
*as shown* (presentation order and surface form). The call engine (`backends.engine`)
validates the answer, maps shown labels back to contract labels, reorders to canonical
order and picks the argmax; backends never do that themselves.

Two ways to answer:
- `predict(request)` (async): one request; used by remote backends through the engine's
  bounded-concurrency loop.
- `decide_batch(batch)` (sync): in-process backends (the mock) decide a whole shard in one
  vectorized call and answer directly in canonical label order; the engine prefers it when
  `supports_batch` is true.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from decflow.backends.model_identity import ModelIdentity, unreported

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
    """One case as a backend is asked it: its id, the decision and the case's input."""

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
    """A backend's health check: its status and what it said."""

    status: HealthStatus
    detail: str


class BackendError(Exception):
    """A per-case failure; `kind` is the typed error kind recorded for the case, `status`
    the HTTP status that caused it (None for transport failures and bad bodies)."""

    kind = "backend_error"
    status: int | None = None


class ReportedFailure(BackendError):
    """A per-case failure of code decflow runs but does not own (a plugin in its worker
    process, a callable in its thread), with the kind it was recorded as."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind if kind in ERROR_KINDS else "exception"
        self.status = status


class BackendTimeout(BackendError):
    kind = "timeout"


class BackendUnavailable(BackendError):
    kind = "unavailable"


class InvalidResponse(BackendError):
    kind = "invalid_response"


Item = TypeVar("Item", covariant=True)


class Column(Protocol[Item]):
    """A column of a request batch: a list, or a polars Series (no copy to a list)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Item: ...

    def __iter__(self) -> Iterator[Item]: ...


@dataclass(frozen=True, slots=True)
class RequestBatch:
    """A shard of requests for `decide_batch`, as columns.

    `input_text[i]` is a string input, or None when the input is the object whose compact
    JSON is `input_json[i]`; `label_orders[i, j]` is the contract label index shown at
    position j of request i, and `shown_labels[i]` are the labels as shown (same order).
    """

    request_ids: Column[str]
    input_text: Column[str | None]
    input_json: Column[str | None]
    shown_labels: Column[Sequence[str]]
    label_orders: Any  # numpy int array, n x L


@dataclass(slots=True)
class BatchAnswer:
    """Canonical-order probabilities (n x L); rows with an error kind are ignored."""

    probabilities: Any  # numpy float64 array, n x L
    error_kinds: list[str | None]
    error_messages: list[str | None]
    model: str | None = None
    model_version: str | None = None


class Backend(ABC):
    """A configured backend. `name` is the contract name (`default` or a `backends` key)."""

    provider: str = ""
    supports_batch: bool = False
    # The version of how this backend builds requests and reads answers: part of every
    # call-cache key, so a change to either never serves an answer read the old way.
    cache_format: str = "1"

    def __init__(self, name: str, model: str | None) -> None:
        self.name = name
        self.model = model

    @abstractmethod
    async def predict(self, request: DecisionRequest) -> Prediction:
        """Decide one request (remote backends)."""

    def decide_batch(self, batch: RequestBatch) -> BatchAnswer:
        """Decide a shard in one call (in-process backends set `supports_batch = True`)."""
        raise NotImplementedError

    def check_presentations(  # noqa: B027 - optional hook; most backends accept any labels
        self, presentations: Sequence[Sequence[str]]
    ) -> None:
        """Refuse, before any call, label presentations this backend cannot answer."""

    def prepare_run(self, presentations: Sequence[Sequence[str]]) -> dict[str, Any] | None:
        """Before a run's first call, from every presentation the run will send: refuse what
        this backend cannot answer (raise a `DecflowError`) and return the run's plan, a
        JSON-able dict that every instance of the backend calling for this run adopts
        (`use_plan`) so that all shards read answers the same way; None when there is
        nothing to share."""
        self.check_presentations(presentations)
        return None

    # Requests `prepare_run` sent to the model (probes, paid like answers): the run counts
    # them among the requests it sent, whether its answers came from the cache or not.
    plan_requests: int = 0

    def makes_plans(self) -> bool:
        """Whether this backend looks at presentations before a run (the default hooks
        accept every presentation, so a run need not collect them)."""
        kind = type(self)
        return (kind.check_presentations is not Backend.check_presentations
                or kind.prepare_run is not Backend.prepare_run)

    def use_plan(self, plan: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Adopt the plan `prepare_run` returned for this run (possibly in another process)."""

    async def healthcheck(self) -> Health:
        return Health("unknown", "no health_url configured")

    def details(self) -> dict[str, Any]:
        """Provider details stored in reports (never credentials)."""
        return {}

    # -- the call cache's keys (`decflow.backends.call_keys`) ----------------------------

    def call_identity(self) -> dict[str, Any]:
        """What this backend is configured to ask (provider, model, where), JSON-able and
        never a credential; part of every call-cache key. Default: the provider, the
        configured model and `details()`, for backends whose details do not change while
        they answer."""
        return {"provider": self.provider, "model": self.model, "details": self.details()}

    def request_sent(self, request: DecisionRequest) -> Any:
        """The request as this backend sends it for `request` (JSON-able): the decision as
        shown (labels in order and form) and the input. A backend whose wire request holds
        more (a prompt, decoding settings) says so."""
        decision = request.decision
        return {"decision": [decision.name, decision.type, list(decision.labels),
                             decision.description], "input": request.input}

    async def model_identity(self) -> ModelIdentity:
        """What the service reports about the model that answers (asked once per run when
        the call cache is on)."""
        return unreported(self.provider)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release clients and connections."""
