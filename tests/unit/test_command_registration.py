"""The command line registers only the commands it is asked for, and every command when it
names none; the map of modules to commands is the one the modules register."""

from __future__ import annotations

import importlib

import typer

from decflow.commands import COMMAND_MODULES, register


def _names(app: typer.Typer) -> list[str | None]:
    return [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]


def test_each_module_registers_the_commands_the_map_names() -> None:
    for module, names in COMMAND_MODULES.items():
        app = typer.Typer()
        importlib.import_module(f"decflow.commands.{module}").register(app)
        assert sorted(str(n) for n in _names(app)) == sorted(names), module


def test_a_named_command_registers_itself_only_and_then_all_come_in_order() -> None:
    app = typer.Typer()
    register(app, ["fuzz", "contract.yaml"])
    assert _names(app) == ["fuzz"]
    register(app, ["fuzz", "-h"])  # already there: nothing added twice
    assert _names(app) == ["fuzz"]
    register(app, ["test", "-h"])
    assert _names(app) == ["fuzz", "test"]
    register(app, ["runs", "ls"])
    assert _names(app) == ["fuzz", "test", "runs"]
    register(app, ["--version"])  # no command named: all of them, in the listed order
    everything = [name for names in COMMAND_MODULES.values() for name in names]
    assert sorted(str(n) for n in _names(app)) == sorted(everything)
    assert [c.name for c in app.registered_commands] == [n for n in everything if n != "runs"]
    register(app, [])
    assert len(_names(app)) == len(everything)
