"""Which decflow extensions a contract uses.

A contract that uses none is a DecGuard 0.1 contract: its verdicts keep DecGuard's
point-estimate rules (PRODUCT §4, "DecGuard parity"). One that uses any of them gets
decflow's evidence gating where the semantics call for it (regression diffs among them).
"""

from __future__ import annotations

from decflow.contracts.contract import Contract
from decflow.contracts.properties import EXTENSION_PROPERTIES

# Backend providers DecGuard 0.1 does not have.
EXTENSION_PROVIDERS = ("openai",)


def decflow_extensions(contract: Contract) -> list[str]:
    """The contract paths of the decflow extensions the contract sets, in contract order
    (empty for a plain DecGuard 0.1 contract)."""
    used: list[str] = []
    backends = [("backend", contract.backend)] + [
        (f"backends.{name}", config) for name, config in contract.backends.items()
    ]
    used += [f"{path}.provider: {config.provider}" for path, config in backends
             if config.provider in EXTENSION_PROVIDERS]
    used += [f"properties.{name}" for name in EXTENSION_PROPERTIES
             if getattr(contract.properties, name) is not None]
    if contract.regression.gating is not None:
        used.append("regression.gating")
    if contract.diagnostics is not None:
        sections = [f"diagnostics.{name}" for name, value in contract.diagnostics
                    if value is not None]
        used += sections or ["diagnostics"]
    return used
