"""The validated contract: one object that the rest of decflow reads."""

from __future__ import annotations

from dataclasses import dataclass

from decflow.contracts.decision import Decision
from decflow.contracts.gates import GoldenGates, Production, Regression
from decflow.contracts.properties import PropertySet
from decflow.contracts.providers import BackendConfig
from decflow.contracts.sections import (
    Diagnostics,
    Evaluation,
    Fuzz,
    Monitor,
    Policy,
    Sequential,
)
from decflow.errors import DecflowError

DEFAULT_BACKEND = "default"


@dataclass(frozen=True, slots=True)
class Contract:
    """A contract's sections, validated."""

    schema_version: str
    decision: Decision
    backend: BackendConfig
    backends: dict[str, BackendConfig]
    dataset: str | None
    evaluation: Evaluation
    requirements: GoldenGates
    warnings: GoldenGates
    properties: PropertySet
    fuzz: Fuzz
    regression: Regression
    production: Production
    policy: Policy | None
    diagnostics: Diagnostics | None
    sequential: Sequential | None = None
    monitor: Monitor | None = None

    @property
    def backend_names(self) -> list[str]:
        return [DEFAULT_BACKEND, *self.backends]

    def backend_config(self, name: str) -> BackendConfig:
        """`default` is the top-level `backend`; other names come from `backends`."""
        if name == DEFAULT_BACKEND:
            return self.backend
        if name not in self.backends:
            defined = ", ".join(self.backend_names)
            raise DecflowError(f"unknown backend {name!r}; the contract defines: {defined}")
        return self.backends[name]
