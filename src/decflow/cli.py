"""The `decflow` command line (typer).

The direct path never imports prefect: commands import what they need inside their bodies,
so `decflow --version` and a direct `decflow test` start fast. Errors print
`error: <message>` and exit 2; unexpected exceptions print `internal error: …` and exit 2
(`DECFLOW_DEBUG=1` adds the traceback).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import NoReturn

import typer

from decflow import __version__
from decflow.errors import DecflowError

app = typer.Typer(
    name="decflow",
    help="Test, fuzz, compare, monitor and gate probabilistic AI decisions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"decflow {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Test, fuzz, compare, monitor and gate probabilistic AI decisions."""


def fail(message: str) -> NoReturn:
    raise DecflowError(message)


def _register() -> None:
    from decflow.commands import register_all

    register_all(app)


def main() -> None:
    _register()
    try:
        app(standalone_mode=False)
    except DecflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        _debug_traceback()
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("error: interrupted", err=True)
        sys.exit(2)
    except SystemExit:
        raise
    except Exception as exc:
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(2)
        typer.echo(
            f"internal error: {type(exc).__name__}: {exc} "
            "(set DECFLOW_DEBUG=1 for a traceback)",
            err=True,
        )
        _debug_traceback()
        sys.exit(2)


def _debug_traceback() -> None:
    if os.environ.get("DECFLOW_DEBUG") == "1":
        traceback.print_exc()
