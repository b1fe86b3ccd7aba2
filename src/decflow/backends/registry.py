"""Build a backend instance from a contract's backend configuration.

Registered providers (`decflow.contracts.providers.BACKEND_PROVIDERS`) are imported when
a backend is built, so that a mock run never loads the HTTP client; third-party providers
come only from installed entry points (group `decflow.backends`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from decflow.backends.base import Backend, DecisionSpec
from decflow.contracts.providers import BACKEND_PROVIDERS

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

# A registered provider's backend class: (backend name, model, settings, decision).
BackendClass = Callable[[str, str | None, Any, DecisionSpec], Backend]


def decision_spec(contract: Contract) -> DecisionSpec:
    """The canonical decision spec (labels in contract order and form)."""
    decision = contract.decision
    return DecisionSpec(
        decision.name, decision.type, tuple(decision.labels), getattr(decision, "description", None)
    )


def backend_class(contract: Contract, name: str) -> type[Backend] | None:
    """The class of backend `name` of a validated contract; None for a plugin's (known
    only once its worker has loaded it)."""
    config = contract.backend_config(name)
    if config.provider not in BACKEND_PROVIDERS:
        return None
    module, _, attribute = BACKEND_PROVIDERS.get(config.provider).backend.partition(":")
    found: type[Backend] = getattr(importlib.import_module(module), attribute)
    return found


def build_backend(contract: Contract, name: str) -> Backend:
    """Instantiate backend `name` (`default` or a `backends` key) of a validated contract."""
    config = contract.backend_config(name)
    spec = decision_spec(contract)
    found = backend_class(contract, name)
    if found is not None:
        make: BackendClass = found  # every provider's class takes these four
        return make(name, config.model, config.settings, spec)
    from decflow.backends.plugins import load_plugin_backend

    return load_plugin_backend(config.provider, config.raw, name=name, decision=spec)

