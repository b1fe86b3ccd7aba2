"""The worker process that hosts plugin backends (`python -P -s -m
decflow.backends.plugin_host`, started by `decflow.backends.plugins`).

Plugins are loaded here by their entry-point name, so nothing is pickled and nothing of
theirs runs in decflow's own process. One worker hosts the instances of one provider; each
instance is built from its contract entry with the plugin's `from_config` and answers the
calls of the `Backend` interface by instance id. Values travel as JSON (`requests`,
`batches` and `answers` below are the two sides' shared spelling).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from decflow.backends.base import (
    ERROR_KINDS,
    Backend,
    BackendError,
    BatchAnswer,
    DecisionRequest,
    DecisionSpec,
    RequestBatch,
)
from decflow.errors import ConfigurationError, DecflowError
from decflow.workers.serve import exception_text, serve

GROUP = "decflow.backends"


def _entry_point(provider: str) -> EntryPoint:
    found = [ep for ep in entry_points(group=GROUP) if ep.name == provider]
    if not found:
        available = sorted(ep.name for ep in entry_points(group=GROUP))
        raise ConfigurationError(
            f"unknown provider '{provider}'; installed backend plugins: "
            f"{', '.join(available) or 'none'}"
        )
    return found[0]


def load_plugin_class(provider: str) -> type[Backend]:
    entry = _entry_point(provider)
    try:
        loaded = entry.load()
    except BaseException as exc:  # a sys.exit at import time too: this is its worker
        raise ConfigurationError(
            f"backend plugin '{provider}' ({entry.value}) failed to import: "
            f"{exception_text(exc)}"
        ) from None
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise ConfigurationError(
            f"backend plugin '{provider}' ({entry.value}) is not a subclass of "
            "decflow.backends.base.Backend"
        )
    return loaded


def build_plugin(
    provider: str, config: dict[str, Any], *, name: str, decision: DecisionSpec
) -> Backend:
    """Backend `name` built from its contract entry (`config`, as written) by the plugin."""
    cls = load_plugin_class(provider)
    from_config = getattr(cls, "from_config", None)
    if from_config is None:
        raise ConfigurationError(
            f"backend plugin '{provider}' ({cls.__module__}.{cls.__qualname__}) has no "
            "from_config(config, *, name, decision) classmethod"
        )
    try:
        backend = from_config(config, name=name, decision=decision)
    except DecflowError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"backend '{name}' (provider '{provider}'): invalid configuration: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(backend, Backend):
        raise ConfigurationError(
            f"backend plugin '{provider}': from_config returned {type(backend).__name__}, "
            "not a Backend"
        )
    return backend


# -- the shared spelling of values ------------------------------------------------------


def decision_json(decision: DecisionSpec) -> dict[str, Any]:
    return {"name": decision.name, "type": decision.type, "labels": list(decision.labels),
            "description": decision.description}


def decision_from(data: Mapping[str, Any]) -> DecisionSpec:
    return DecisionSpec(data["name"], data["type"], tuple(data["labels"]), data["description"])


def request_json(request: DecisionRequest) -> dict[str, Any]:
    return {"case_id": request.case_id, "decision": decision_json(request.decision),
            "input": request.input}


def batch_json(batch: RequestBatch) -> dict[str, Any]:
    return {
        "request_ids": list(batch.request_ids),
        "input_text": list(batch.input_text),
        "input_json": list(batch.input_json),
        "shown_labels": [list(labels) for labels in batch.shown_labels],
        "label_orders": batch.label_orders.tolist(),
    }


def answer_json(answer: BatchAnswer) -> dict[str, Any]:
    import numpy as np

    return {
        "probabilities": np.asarray(answer.probabilities, dtype=np.float64).tolist(),
        "error_kinds": list(answer.error_kinds),
        "error_messages": list(answer.error_messages),
        "model": answer.model,
        "model_version": answer.model_version,
    }


def failure_json(exc: BaseException) -> dict[str, Any]:
    """A call's failure as the parent reads it: a `BackendError` keeps its kind and
    message; a `DecflowError` stops the run there too; anything else is `exception`."""
    if isinstance(exc, DecflowError):
        return {"decflow": True, "message": str(exc)}
    if isinstance(exc, BackendError):
        kind = exc.kind if exc.kind in ERROR_KINDS else "backend_error"
        status = exc.status if isinstance(exc.status, int) else None
        try:
            message = str(exc)
        except BaseException:  # a hostile __str__: the kind still says what happened
            message = type(exc).__name__
        return {"kind": kind, "message": message, "status": status}
    return {"kind": "exception", "message": exception_text(exc)}


# -- the worker -------------------------------------------------------------------------


class PluginHost:
    """The `serve` handler: backend instances by id, and the calls on them."""

    def __init__(self) -> None:
        self.instances: dict[str, Backend] = {}

    def failure(self, exc: BaseException) -> dict[str, Any]:
        return failure_json(exc)

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "init":
            return self._init(args)
        backend = self.instances[args["instance"]]
        if op == "predict":
            return self._predict(backend, args["request"])
        if op == "healthcheck":
            return self._health(backend)
        if op == "prepare_run":
            return backend.prepare_run([tuple(p) for p in args["presentations"]])
        if op == "use_plan":
            return backend.use_plan(args["plan"])
        if op == "details":
            return backend.details()
        if op == "decide_batch":
            return answer_json(backend.decide_batch(self._batch(args["batch"])))
        if op == "aclose":
            return self._close(args["instance"])
        raise ValueError(f"unknown call {op!r}")

    def _init(self, args: dict[str, Any]) -> dict[str, Any]:
        backend = build_plugin(args["provider"], args["config"], name=args["name"],
                               decision=decision_from(args["decision"]))
        self.instances[args["instance"]] = backend
        return {"model": backend.model, "supports_batch": bool(backend.supports_batch),
                "makes_plans": backend.makes_plans()}

    async def _predict(self, backend: Backend, data: dict[str, Any]) -> dict[str, Any]:
        request = DecisionRequest(data["case_id"], decision_from(data["decision"]),
                                  data["input"])
        prediction = await backend.predict(request)
        return {"probabilities": prediction.probabilities, "model": prediction.model,
                "model_version": prediction.model_version, "metadata": prediction.metadata}

    async def _health(self, backend: Backend) -> dict[str, str]:
        health = await backend.healthcheck()
        return {"status": health.status, "detail": health.detail}

    async def _close(self, instance: str) -> None:
        backend = self.instances.pop(instance)
        await backend.aclose()

    @staticmethod
    def _batch(data: dict[str, Any]) -> RequestBatch:
        import numpy as np

        return RequestBatch(
            request_ids=data["request_ids"], input_text=data["input_text"],
            input_json=data["input_json"],
            shown_labels=[tuple(labels) for labels in data["shown_labels"]],
            label_orders=np.asarray(data["label_orders"], dtype=np.int64),
        )


def batch_answer(data: Mapping[str, Any], rows: int, width: int) -> BatchAnswer:
    """The parent's `BatchAnswer` from the worker's JSON (shapes checked by the engine)."""
    import numpy as np

    probabilities = np.asarray(data["probabilities"], dtype=np.float64).reshape(rows, width)
    return BatchAnswer(probabilities, list(data["error_kinds"]), list(data["error_messages"]),
                       data.get("model"), data.get("model_version"))


if __name__ == "__main__":
    serve(PluginHost(), sys.argv[1:])
