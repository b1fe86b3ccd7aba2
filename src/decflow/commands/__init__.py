"""CLI commands, one module each; `register_all` adds them to the typer app."""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES = (
    "validate",
    "contract_run",
    "report",
    "runs",
    "replay",
    "diff",
    "check",
    "monitor",
    "run",
    "orchestrate",
    "probe",
)


def register_all(app: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"decflow.commands.{name}")
        module.register(app)
