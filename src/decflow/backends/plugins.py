"""Third-party backends from installed entry points (group `decflow.backends`), run in a
worker process.

A plugin is a `decflow.backends.base.Backend` subclass registered under the entry-point
name used as `provider` in contracts. It provides a classmethod
`from_config(config, *, name, decision)` that validates its settings without network
access or model loading (`validate` must stay offline) and returns an instance. Per-case
failures follow `error_kind`: `BackendError` subclasses give their own kind, any other
exception gives `exception` ("RuntimeError: boom"). Load problems are ConfigurationErrors
(exit 2). Built-in provider names cannot be shadowed (the registry resolves them first).

Plugin code never runs in decflow's process: `PluginBackend` forwards each call to the
provider's worker process (`decflow.backends.plugin_host`), so a `sys.exit`, an
`os._exit`, a crash or a hang in it ends that call as an errored case (`exception`, or
`timeout` after `DECFLOW_CALL_TIMEOUT` seconds) and the run still reports; a failure while
the plugin is loaded or built stops the run with exit 2.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from decflow.backends.base import (
    Backend,
    BatchAnswer,
    DecisionRequest,
    DecisionSpec,
    Health,
    Prediction,
    ReportedFailure,
    RequestBatch,
)
from decflow.backends.plugin_host import (
    batch_answer,
    batch_json,
    decision_json,
    request_json,
)
from decflow.errors import ConfigurationError, DecflowError
from decflow.workers.process import CallFailed, WorkerFailed, WorkerProcess, shared_worker
from decflow.workers.settings import call_timeout

HOST = "decflow.backends.plugin_host"


def _case_error(exc: CallFailed | WorkerFailed) -> Exception:
    """What a failed call raises for the engine: a `DecflowError` the plugin raised stops
    the run (exit 2), anything else is a typed error of that case."""
    if isinstance(exc, WorkerFailed):
        return ReportedFailure(exc.kind, str(exc))
    failure = exc.failure
    if failure.get("decflow"):
        return ConfigurationError(str(failure.get("message")))
    status = failure.get("status")
    return ReportedFailure(str(failure.get("kind")), str(failure.get("message")),
                           status if isinstance(status, int) else None)


class PluginBackend(Backend):
    """A plugin backend's instance in its worker process, behind the `Backend` interface."""

    def __init__(self, provider: str, config: dict[str, Any], *, name: str,
                 decision: DecisionSpec, timeout: float | None = None) -> None:
        self.timeout = call_timeout(timeout)
        self.worker: WorkerProcess = shared_worker(HOST, provider, f"backend plugin '{provider}'")
        self.instance = uuid.uuid4().hex
        init = {"instance": self.instance, "provider": provider, "config": config,
                "name": name, "decision": decision_json(decision)}
        try:
            info = self.worker.setup(self.instance, "init", init, self.timeout)
        except CallFailed as exc:
            message = str(exc.failure.get("message"))
            if not exc.failure.get("decflow"):
                message = f"backend '{name}' (provider '{provider}'): {message}"
            raise ConfigurationError(message) from None
        except WorkerFailed as exc:
            raise ConfigurationError(
                f"backend '{name}' (provider '{provider}') could not be loaded: {exc}"
            ) from None
        model = info.get("model") if isinstance(info, dict) else None
        super().__init__(name, model if isinstance(model, str) else None)
        self.provider = provider
        self.supports_batch = bool(info.get("supports_batch"))
        self._makes_plans = bool(info.get("makes_plans"))
        self._abandoned = False
        self._in_flight = 0

    def _call(self, op: str, **args: Any) -> Any:
        try:
            return self.worker.request(op, {"instance": self.instance, **args}, self.timeout)
        except (CallFailed, WorkerFailed) as exc:
            raise _case_error(exc) from None

    async def _acall(self, op: str, **args: Any) -> Any:
        self._in_flight += 1
        try:
            return await self.worker.arequest(op, {"instance": self.instance, **args},
                                              self.timeout)
        except (CallFailed, WorkerFailed) as exc:
            raise _case_error(exc) from None
        except asyncio.CancelledError:
            self._abandoned = True  # the call runs on in the worker, which may be stuck
            raise
        finally:
            self._in_flight -= 1

    async def predict(self, request: DecisionRequest) -> Prediction:
        answer = await self._acall("predict", request=request_json(request))
        if not isinstance(answer, dict):
            raise ReportedFailure("invalid_response", "the plugin's answer is not a Prediction")
        metadata = answer.get("metadata")
        return Prediction(answer.get("probabilities") or {}, _text(answer.get("model")),
                          _text(answer.get("model_version")),
                          metadata if isinstance(metadata, dict) else None)

    def decide_batch(self, batch: RequestBatch) -> BatchAnswer:
        rows, width = batch.label_orders.shape
        try:
            return batch_answer(self._call("decide_batch", batch=batch_json(batch)), rows, width)
        except ReportedFailure as exc:
            return _all_failed(rows, width, exc.kind, str(exc))
        except (KeyError, TypeError, ValueError):
            return _all_failed(rows, width, "invalid_response",
                               "the plugin's batch answer does not fit the batch")

    async def healthcheck(self) -> Health:
        try:
            health = await self._acall("healthcheck")
        except ReportedFailure as exc:
            return Health("unhealthy", str(exc))
        status = health.get("status") if isinstance(health, dict) else None
        if status not in ("ok", "unhealthy", "unknown"):
            return Health("unhealthy", "the plugin's health check answered no status")
        return Health(status, str(health.get("detail", "")))

    def makes_plans(self) -> bool:
        return self._makes_plans

    def prepare_run(self, presentations: Sequence[Sequence[str]]) -> dict[str, Any] | None:
        try:
            plan = self._call("prepare_run", presentations=[list(p) for p in presentations])
        except ReportedFailure as exc:
            raise DecflowError(f"backend '{self.name}': preparing the run failed: {exc}") from None
        if plan is not None and not isinstance(plan, dict):
            raise DecflowError(f"backend '{self.name}': the plugin's run plan is not a mapping")
        return plan

    def use_plan(self, plan: Mapping[str, Any]) -> None:
        args = {"instance": self.instance, "plan": dict(plan)}
        try:
            self.worker.request("use_plan", args, self.timeout)
        except (CallFailed, WorkerFailed) as exc:
            raise DecflowError(
                f"backend '{self.name}': adopting the run's plan failed: {exc}"
            ) from None
        self.worker.remember(self.instance, "use_plan", args)

    def details(self) -> dict[str, Any]:
        try:
            details = self._call("details")
        except ReportedFailure:
            return {}
        return details if isinstance(details, dict) else {}

    async def aclose(self) -> None:
        self.worker.forget(self.instance)
        if self._in_flight or self._abandoned or not self.worker.running():
            # an interrupted run must not wait for a worker that may be stuck in a call
            # (it is stopped at exit), and an ended worker holds nothing to release
            return
        try:
            await self._acall("aclose")
        except (ReportedFailure, DecflowError):
            return  # closing is best effort: the worker is stopped at exit anyway


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None if value is None else json.dumps(value)


def _all_failed(rows: int, width: int, kind: str, message: str) -> BatchAnswer:
    import numpy as np

    return BatchAnswer(np.zeros((rows, width)), [kind] * rows, [message] * rows)


def load_plugin_backend(
    provider: str, config: dict[str, Any], *, name: str, decision: DecisionSpec
) -> Backend:
    """Build backend `name` from its contract entry (`config`, as written) via the plugin,
    in its worker process."""
    return PluginBackend(provider, config, name=name, decision=decision)
