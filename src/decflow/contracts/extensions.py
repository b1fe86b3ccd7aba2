"""Which decflow extensions a contract uses.

A contract that uses none is a DecGuard 0.1 contract: its verdicts keep DecGuard's
point-estimate rules (PRODUCT §4, "DecGuard parity"). One that uses any of them gets
decflow's evidence gating where the semantics call for it (regression diffs among them).
The extensions are the ones the canonical JSON leaves out when unset: extension properties,
extension gates, `regression.gating`, `production.gating`, `diagnostics`, `sequential`,
`monitor`, and providers DecGuard does not have.
"""

from __future__ import annotations

from typing import Literal

from decflow.contracts.contract import Contract
from decflow.contracts.gates import (
    Gating,
    extension_golden_gates,
    extension_production_gates,
    extension_regression_gates,
)
from decflow.contracts.properties import extension_properties
from decflow.contracts.providers import extension_providers


def decflow_extensions(contract: Contract) -> list[str]:
    """The contract paths of the decflow extensions the contract sets, in contract order
    (empty for a plain DecGuard 0.1 contract)."""
    used: list[str] = []
    backends = [("backend", contract.backend)] + [
        (f"backends.{name}", config) for name, config in contract.backends.items()
    ]
    used += [f"{path}.provider: {config.provider}" for path, config in backends
             if config.provider in extension_providers()]
    gates = [("requirements", contract.requirements, extension_golden_gates()),
             ("warnings", contract.warnings, extension_golden_gates()),
             ("production.requirements", contract.production.requirements,
              extension_production_gates()),
             ("production.warnings", contract.production.warnings,
              extension_production_gates())]
    used += [f"{section}.{gate}" for section, found, names in gates for gate in names
             if getattr(found, gate, None) is not None]
    used += [f"regression.{prefix}{gate}" for gate in extension_regression_gates()
             for level, prefix in (("requirement", ""), ("warning", "warnings."))
             if contract.regression.limit(level, gate) is not None]
    used += [f"properties.{name}" for name in extension_properties()
             if getattr(contract.properties, name, None) is not None]
    if contract.regression.gating is not None:
        used.append("regression.gating")
    if contract.production.gating is not None:
        used.append("production.gating")
    if contract.diagnostics is not None:
        sections = [f"diagnostics.{name}" for name, value in contract.diagnostics
                    if value is not None]
        used += sections or ["diagnostics"]
    if contract.sequential is not None:
        used.append("sequential")
    if contract.monitor is not None:
        used.append("monitor")
    return used


def gating_rule(contract: Contract, section: Literal["regression", "production"]
                ) -> tuple[Gating, str]:
    """(gating, why) of a contract's `regression` or `production` gates: the section's
    `gating` when set; else evidence for a contract that uses any decflow extension, and
    DecGuard's point estimates for a plain DecGuard 0.1 contract (PRODUCT §4)."""
    configured = getattr(contract, section).gating
    if configured is not None:
        return configured, f"{section}.gating: {configured}"
    used = decflow_extensions(contract)
    if used:
        return "evidence", f"the contract uses decflow extensions ({', '.join(used)})"
    return "point", ("a DecGuard 0.1 contract keeps DecGuard's point-estimate gates "
                     f"(set {section}.gating: evidence for evidence verdicts)")
