"""Every credential a contract would use, and every origin it could be sent to.

`decflow validate` lists them; `register_values` hands their values to
`decflow.redaction` when a contract is loaded, so an echo of one is removed wherever it
appears. Plugin backends read their own settings: a plugin setting whose name ends in
`_env` and holds a variable name counts as a credential (its origins are the plugin's).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from decflow.contracts.credentials import is_allowed, origin_text
from decflow.contracts.paraphrase import OpenAIParaphraseSource
from decflow.contracts.properties import Paraphrase
from decflow.contracts.providers import BackendConfig, ProviderSettings
from decflow.redaction import register

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

PLUGIN_ORIGINS = "(the plugin's own)"


@dataclass(frozen=True, slots=True)
class CredentialUse:
    """An environment variable a contract sends as a credential, and where to."""

    field: str  # where the contract names it, e.g. backends.staging.bearer_token_env
    variable: str
    origins: tuple[str, ...]  # scheme://host[:port]; empty for a plugin's own

    def allowed(self) -> bool | None:
        """Whether the environment allows every origin (None: a plugin decides)."""
        if not self.origins:
            return None
        return all(is_allowed(self.variable, origin) for origin in self.origins)


def _origins(*urls: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(origin_text(url) for url in urls if url))


def _backend_uses(path: str, config: BackendConfig) -> Iterator[CredentialUse]:
    if isinstance(config.settings, ProviderSettings):
        for field, variable, urls in config.settings.credentials():
            yield CredentialUse(f"{path}.{field}", variable, _origins(*urls))
        return
    for key, value in config.raw.items():
        if isinstance(key, str) and key.endswith("_env") and isinstance(value, str):
            yield CredentialUse(f"{path}.{key}", value, ())


def credential_uses(contract: Contract) -> list[CredentialUse]:
    """The credentials of every backend entry and of the paraphrase source, in contract
    order."""
    uses: list[CredentialUse] = []
    for name, config in [("default", contract.backend), *contract.backends.items()]:
        uses += _backend_uses("backend" if name == "default" else f"backends.{name}", config)
    paraphrase = contract.properties.get("paraphrase")
    source = paraphrase.source if isinstance(paraphrase, Paraphrase) else None
    if isinstance(source, OpenAIParaphraseSource) and source.api_key_env:
        uses.append(CredentialUse("properties.paraphrase.source.api_key_env",
                                  source.api_key_env, _origins(source.url)))
    return uses


def register_values(contract: Contract) -> None:
    """Register the value of every credential variable the contract names that is set."""
    register(os.environ.get(use.variable, "") for use in credential_uses(contract))
