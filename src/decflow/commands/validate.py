"""`decflow validate CONTRACT [-d DATASET]`: offline validation of contract, backends, dataset."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from decflow.commands import common

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.gates import GoldenGates

def _backends_line(contract: Contract) -> str:
    names = [("default", contract.backend), *contract.backends.items()]
    return ", ".join(f"{name}={config.provider}" for name, config in names)


def _count_gates(gates: GoldenGates) -> int:
    from decflow.gates import configured_gates

    return len(configured_gates(gates))


def _production_line(contract: Contract) -> str | None:
    production = contract.production
    gate_names = [name for name in type(production.requirements).model_fields]
    required = sum(getattr(production.requirements, g) is not None for g in gate_names)
    segment_names = [name for name in type(production.segment_requirements).model_fields]
    segment = sum(getattr(production.segment_requirements, g) is not None for g in segment_names)
    if not production.segments and not required and not segment:
        return None
    segments = ", ".join(production.segments) or "none"
    return f"segments: {segments}; requirements: {required}; segment requirements: {segment}"


def _credential_lines(contract: Contract) -> list[str]:
    """One line per credential: where the contract names it, the variable, the origins it
    would be sent to, and whether this environment allows that."""
    from decflow.contracts.credential_uses import credential_uses
    from decflow.contracts.credentials import ALLOW_ENV

    lines = []
    for use in credential_uses(contract):
        allowed = use.allowed()
        verdict = ("sent by the plugin itself" if allowed is None else "allowed" if allowed
                   else f"NOT allowed here: a run stops with exit 2 unless {ALLOW_ENV} lists it")
        origins = ", ".join(use.origins) or "its plugin's own origins"
        lines.append(f"{use.field}: {use.variable} -> {origins} ({verdict})")
    if not lines:
        return ["    credentials none"]
    return [f"    credentials {lines[0]}", *(f"                {line}" for line in lines[1:])]


def validate(contract_path: str, dataset: str | None, allow_paths: Sequence[str] = ()) -> str:
    from decflow.backends.registry import build_backend
    from decflow.contracts import load_contract
    from decflow.data.golden_dataset import load_golden

    loaded = load_contract(contract_path)
    contract = loaded.contract
    for name in ["default", *contract.backends]:
        build_backend(contract, name)
    decision = contract.decision
    lines = [
        f"OK  {contract_path}",
        f"    decision  {decision.name} ({decision.type}): {', '.join(decision.labels)}",
        f"    backends  {_backends_line(contract)}",
    ]
    if dataset is None and contract.dataset is None:
        lines.append("    dataset   none (pass --dataset to `decflow test`)")
    else:
        if dataset is not None:
            read, shown = dataset, dataset
        else:  # the contract's own: inside its folder (or an allowed one)
            written = str(contract.dataset)
            read = str(loaded.resolve(written, allowed=allow_paths))
            shown = os.path.join(os.path.dirname(contract_path), written)
        data = load_golden(read, decision.labels, shown_path=shown)
        lines.append(f"    dataset   {shown}: {data.n_cases} cases, {data.n_labeled} labeled")
    lines.append(
        f"    gates     requirements: {_count_gates(contract.requirements)}, "
        f"warnings: {_count_gates(contract.warnings)}"
    )
    enabled = [name for name, _ in contract.properties.enabled()]
    if enabled:
        lines.append(f"    properties {', '.join(enabled)}")
    production = _production_line(contract)
    if production:
        lines.append(f"    production {production}")
    if contract.policy is not None:
        lines.append(f"    policy     {len(contract.policy.routes)} routes")
    lines += _credential_lines(contract)
    lines.append(f"    hash      {loaded.hash}")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_command(
        contract: str = typer.Argument(..., help="Contract file (.yaml/.yml/.json)."),
        dataset: str | None = typer.Option(
            None, "-d", "--dataset", help="Golden dataset (overrides the contract's)."
        ),
        allow_paths: list[str] = common.ALLOW_PATH_OPTION,
    ) -> None:
        """Validate a contract, its backends and dataset offline; print its hash."""
        typer.echo(validate(contract, dataset, allow_paths), nl=False)
