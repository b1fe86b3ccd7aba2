"""The `decflow` command line (typer).

The direct path never imports prefect: commands import what they need inside their bodies,
so `decflow --version` and a direct `decflow test` start fast. Errors print
`error: <message>` and exit 2 (usage errors too: one line naming the command, the closest
option to a mistyped one and its `-h`); unexpected exceptions print `internal error: …` and exit 2
(`DECFLOW_DEBUG=1` adds the traceback). SIGINT and SIGTERM print one line (naming the run
left resumable, if any) and exit 130 and 143.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import threading
import traceback
import types
from collections.abc import Iterable
from typing import Any

import typer
from typer.exceptions import TyperException

from decflow import startup
from decflow.errors import DecflowError, Interrupted
from decflow.interrupts import exiting, install, stopping
from decflow.redaction import redacted_output
from decflow.untrusted import escape
from decflow.version import __version__

app = typer.Typer(
    name="decflow",
    help="Test, fuzz, compare, monitor and gate probabilistic AI decisions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: rich's table truncates long flags such as --no-healthcheck at 80 columns
    rich_markup_mode=None,
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


def _register(args: list[str] | None = None) -> None:
    """The commands `args` call (all of them without `args`: `decflow.commands.register`)."""
    from decflow.commands import register

    register(app, args or ())


def invoke(args: list[str] | None = None) -> int:
    """Run the CLI on `args` (default: the process's) and return the exit code (errors
    printed, never raised)."""
    _register(sys.argv[1:] if args is None else args)
    from decflow.commands.streams import guarded_output

    # a credential a backend echoed is never printed; a closed pipe fails nothing
    with redacted_output(), guarded_output():
        return _invoke(args)


def _invoke(args: list[str] | None) -> int:
    try:
        # without standalone mode, click returns the code of a `typer.Exit` instead of raising
        result = app(args=args, prog_name="decflow", standalone_mode=False)
    except DecflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        _debug_traceback()
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except Interrupted as exc:
        return _interrupted(exc)
    except typer.Abort:
        typer.echo("error: interrupted", err=True)
        return 2
    except TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            # bare `decflow`: the help, on stdout; still a usage error (exit 2)
            typer.echo(exc.ctx.get_help())  # type: ignore[attr-defined]
        else:
            typer.echo(f"error: {escape(usage_error(exc, args))}", err=True)
        return 2
    except Exception as exc:
        typer.echo(
            f"internal error: {type(exc).__name__}: {escape(str(exc))} "
            "(set DECFLOW_DEBUG=1 for a traceback)",
            err=True,
        )
        _debug_traceback()
        return 2
    return result if isinstance(result, int) else 0


def usage_error(exc: TyperException, args: list[str] | None = None) -> str:
    """A usage error (unknown option or command, bad or missing value) as one line:
    `decflow test: no such option --stor; the closest is --store (see `decflow test -h`)`,
    instead of click's usage block. `args` (default: the process's) name the command when
    click leaves the error without one (an option missing its value)."""
    from typer._click.exceptions import NoSuchOption

    ctx = getattr(exc, "ctx", None)
    command = (ctx.command_path if ctx is not None
               else _command_path(sys.argv[1:] if args is None else args))
    if isinstance(exc, NoSuchOption):
        message = f"no such option {exc.option_name}"
        closest = _closest_option(exc.option_name, ctx)
        if closest:
            message += f"; the closest is {closest}"
    else:
        text = str(exc.format_message())
        message = text[:1].lower() + text[1:].rstrip(".")
    return f"{command}: {message} (see `{command} -h`)"


def _command_path(args: list[str]) -> str:
    """`decflow runs rm` for `runs rm --dry-run`: the (sub)commands the arguments begin with."""
    import typer.main

    path, command = ["decflow"], typer.main.get_command(app)
    for token in args:
        found = getattr(command, "commands", {}).get(token)
        if found is None:
            break
        path.append(token)
        command = found
    return " ".join(path)


def _closest_option(typed: str, ctx: object) -> str | None:
    """The option of the command most like `typed`, when one is like it at all (difflib's
    usual 0.6 similarity: `--stor` → `--store`, `--kep` → `--keep`; `-Z` → none, rather
    than an option that has nothing to do with it)."""
    import difflib

    params = getattr(getattr(ctx, "command", None), "params", ())
    options = [name for param in params
               for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
               if name.startswith("-")]
    found = difflib.get_close_matches(typed, options, n=1)
    return found[0] if found else None


def _interrupted(exc: Interrupted) -> int:
    """One line for SIGINT/SIGTERM, naming the run left resumable; exit 128 + signal."""
    message = "interrupted"
    if exc.run_id:
        message += f"; run {exc.run_id} is resumable: {exc.resume}"
    typer.echo(f"error: {escape(message)}", err=True)
    return 128 + exc.signum


# polars allocates through jemalloc, which by default gives each thread its own arena and
# returns freed pages only after 10 s, so a run's peak RSS sums the high-water marks of its
# stages. One arena and a short decay keep it near the live size (refund --all, 10k cases:
# 211-234 -> 185-188 MB over three runs each, CPU unchanged). Set for the command line only,
# before polars loads, and only when the user has not configured jemalloc themselves.
JEMALLOC_CONF = "narenas:1,dirty_decay_ms:200,muzzy_decay_ms:0"


# pydantic looks for plugins (entry points of the `pydantic` group) when it builds its first
# model, by reading the metadata of every installed distribution: 35 ms of CPU before a
# run's first request in a virtualenv of 187 packages. decflow's models are its own and no
# plugin instruments them, so the command line loads none, unless the user has set
# PYDANTIC_DISABLE_PLUGINS themselves (an empty value loads them all).
PYDANTIC_PLUGINS = "__all__"
# The values of PYDANTIC_DISABLE_PLUGINS with which pydantic loads none (its `get_plugins`).
NO_PYDANTIC_PLUGINS = ("__all__", "1", "true")
PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def _plugin_loader_loading_none() -> types.ModuleType:
    """What stands in for pydantic's plugin loader while plugins are off. pydantic imports
    its loader at every validator it builds, whatever PYDANTIC_DISABLE_PLUGINS says, and the
    loader imports importlib.metadata (with email, zipfile, csv: ~40 M instructions, ~12 ms
    before a run's first request, which needs none of them). This one returns no plugin, as
    pydantic's does, while the variable turns plugins off; otherwise it hands over to
    pydantic's own loader (imported then, and used from then on)."""
    loader = types.ModuleType(PYDANTIC_PLUGIN_LOADER, _plugin_loader_loading_none.__doc__)

    def get_plugins() -> Iterable[Any]:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in NO_PYDANTIC_PLUGINS:
            return ()
        if sys.modules.get(PYDANTIC_PLUGIN_LOADER) is loader:
            del sys.modules[PYDANTIC_PLUGIN_LOADER]
        plugins: Iterable[Any] = importlib.import_module(PYDANTIC_PLUGIN_LOADER).get_plugins()
        return plugins

    vars(loader)["get_plugins"] = get_plugins
    return loader


# glibc's malloc serves blocks from 128 KB up by fresh mmaps, and gives freed heap back to
# the kernel, so every batch's numpy arrays page-fault their memory in again: 300k JSONL
# records, 73k page faults and 0.30 s of system time. Serving blocks below 64 MB from the
# heap and keeping up to 256 MB of it freed: 58k faults, 0.25 s; 10M Parquet records 2.6 ->
# 1.7 s of system time, peak RSS unchanged (650-658 vs 655 MB).
GLIBC_MMAP_THRESHOLD = 64 << 20
GLIBC_TRIM_THRESHOLD = 256 << 20


def _keep_freed_heap() -> None:
    """`mallopt` of the thresholds above, where the C library is glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to look into (Windows)
        return
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (macOS, musl): its defaults
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    libc.mallopt(m_mmap_threshold, GLIBC_MMAP_THRESHOLD)
    libc.mallopt(m_trim_threshold, GLIBC_TRIM_THRESHOLD)


def _process_settings() -> None:
    """The allocators' and pydantic's settings above, where the user has set none."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC_CONF)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", PYDANTIC_PLUGINS)
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in NO_PYDANTIC_PLUGINS:
        sys.modules.setdefault(PYDANTIC_PLUGIN_LOADER, _plugin_loader_loading_none())
    _keep_freed_heap()


def main() -> None:
    """The `decflow` command (`decflow.__main__` installs the signal handlers first)."""
    startup.begin()
    install()
    try:
        _process_settings()
        from decflow.commands.check import scan_ahead

        scan_ahead(sys.argv[1:])
        code = invoke()
    except Interrupted as exc:  # before the command started
        code = _interrupted(exc)
    _exit(code)


def _exit(code: int) -> None:
    """End the process with `code` once the command is done. Exit handlers run and output
    is flushed as at any exit, but the interpreter's teardown (freeing every object and
    module: 0.13 s after a check with polars, Arrow and pydantic loaded) is skipped, unless
    another thread still runs or Prefect is loaded (it drains its workers at exit). A
    command stopped by a signal does not wait for its threads (a thread reading records
    can take half a minute to finish its part), and a signal from here on ends the process
    at once (`decflow.interrupts.exiting`)."""
    exiting()
    if "prefect" in sys.modules or (threading.active_count() > 1 and not stopping()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to say there
            stream.flush()
    os._exit(code)


def _debug_traceback() -> None:
    if os.environ.get("DECFLOW_DEBUG") == "1":
        traceback.print_exc()
