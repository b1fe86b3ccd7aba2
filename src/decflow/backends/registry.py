"""Build a backend instance from a contract's backend configuration.

Built-in providers are imported lazily so that a mock run never loads the HTTP client;
third-party providers come only from installed entry points (group `decflow.backends`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from decflow.backends.base import Backend, DecisionSpec

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

BUILTIN_PROVIDERS = ("mock", "http", "systemone", "openai")

# provider -> (module, class) of the built-in remote backends
_REMOTE = {
    "http": ("decflow.backends.http", "HttpBackend"),
    "systemone": ("decflow.backends.systemone", "SystemOneBackend"),
    "openai": ("decflow.backends.openai", "OpenAIBackend"),
}


def decision_spec(contract: Contract) -> DecisionSpec:
    """The canonical decision spec (labels in contract order and form)."""
    decision = contract.decision
    return DecisionSpec(
        decision.name, decision.type, tuple(decision.labels), getattr(decision, "description", None)
    )


def build_backend(contract: Contract, name: str) -> Backend:
    """Instantiate backend `name` (`default` or a `backends` key) of a validated contract."""
    config = contract.backend_config(name)
    spec = decision_spec(contract)
    provider = config.provider
    if provider == "mock":
        from decflow.backends.mock import MockBackend

        return MockBackend(name, config.model, config.settings, spec.labels)
    if provider in _REMOTE:
        module_name, class_name = _REMOTE[provider]
        cls = getattr(importlib.import_module(module_name), class_name)
        backend: Backend = cls(name, config.model, config.settings, spec)
        return backend
    from decflow.backends.plugins import load_plugin_backend

    return load_plugin_backend(provider, config.raw, name=name, decision=spec)

