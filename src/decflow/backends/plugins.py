"""Third-party backends from installed entry points (group `decflow.backends`).

A plugin is a `decflow.backends.base.Backend` subclass registered under the entry-point
name used as `provider` in contracts. It provides a classmethod
`from_config(config, *, name, decision)` that validates its settings without network
access or model loading (`validate` must stay offline) and returns an instance. Per-case
failures follow `error_kind`: `BackendError` subclasses give their own kind, any other
exception gives `exception` ("RuntimeError: boom"). Load problems are ConfigurationErrors
(exit 2). Built-in provider names cannot be shadowed (the registry resolves them first).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from decflow.backends.base import Backend, DecisionSpec
from decflow.errors import ConfigurationError, DecflowError

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
    except Exception as exc:
        raise ConfigurationError(
            f"backend plugin '{provider}' ({entry.value}) failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise ConfigurationError(
            f"backend plugin '{provider}' ({entry.value}) is not a subclass of "
            "decflow.backends.base.Backend"
        )
    return loaded


def load_plugin_backend(
    provider: str, config: dict[str, Any], *, name: str, decision: DecisionSpec
) -> Backend:
    """Build backend `name` from its contract entry (`config`, as written) via the plugin."""
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
