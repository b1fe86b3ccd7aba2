"""CLI commands, one module each; `register` adds to the typer app the ones a command line
calls."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import typer

# Each module, in the order `decflow -h` lists them, with the commands it adds.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "validate": ("validate",),
    "contract_run": ("test", "fuzz", "stability"),
    "report": ("report",),
    "runs": ("runs",),
    "replay": ("replay",),
    "diff": ("diff",),
    "check": ("check",),
    "monitor": ("monitor",),
    "run": ("run",),
    "orchestrate": ("deploy", "prefect-setup", "serve"),
    "probe": ("probe",),
}


def register(app: typer.Typer, args: Sequence[str]) -> None:
    """Add the command `args` start with (`decflow test …`: its module's imports and its
    own options, not the other modules' imports and typer parameters, ≈ 25 ms, nor its
    module's other commands, whose options typer would turn into click parameters too,
    ≈ 3 ms for `fuzz` and `stability`), or every module when they start with none (`-h`,
    `--version`, a mistyped command: the listing and the closest name need them all).
    Already-added commands stay."""
    added = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    first = args[0] if args else None
    wanted = [m for m, names in COMMAND_MODULES.items() if first in names]
    if wanted and first in added:
        return
    if wanted:
        before = len(app.registered_commands)
        importlib.import_module(f"decflow.commands.{wanted[0]}").register(app)
        app.registered_commands[before:] = [
            c for c in app.registered_commands[before:] if c.name == first]
        return
    if added >= {name for names in COMMAND_MODULES.values() for name in names}:
        return
    # all of them, in their listed order
    app.registered_commands.clear()
    app.registered_groups.clear()
    for name in COMMAND_MODULES:
        importlib.import_module(f"decflow.commands.{name}").register(app)
