"""Options and output handling shared by the commands."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from decflow.errors import DecflowError

FORMATS = ("text", "json")
DEFAULT_STORE = ".decflow"

# Options several commands take, declared once so their flags, defaults and help agree.
BACKEND_OPTION = typer.Option("default", "-b", "--backend")
FAIL_ON_WARN_OPTION = typer.Option(False, "--fail-on-warn")
FORMAT_OPTION = typer.Option("text", "-f", "--format", help="text or json.")
HEALTHCHECK_OPTION = typer.Option(True, "--healthcheck/--no-healthcheck")
HTML_OPTION = typer.Option(None, "--html", help="Write HTML here.")
JUNIT_OPTION = typer.Option(None, "--junit", help="Write JUnit XML here.")
MARKDOWN_OPTION = typer.Option(None, "--markdown", help="Write Markdown here.")
MAX_CONCURRENCY_OPTION = typer.Option(None, "--max-concurrency", min=1, max=256)
OUTPUT_OPTION = typer.Option(None, "-o", "--output", help="Write JSON here.")
STORE_OPTION = typer.Option(None, "--store", help="Store URL (.decflow).")


def store_url(option: str | None) -> str:
    return option or os.environ.get("DECFLOW_STORE") or DEFAULT_STORE


def open_store(option: str | None) -> Any:
    from decflow.store.store import Store

    return Store(store_url(option))


def check_format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"'{value}' is not one of: text, json", param_hint="--format")
    return value


def reject_options(reason: str, **given: Any) -> None:
    """Options that do not apply are errors, never silently ignored."""
    for flag, value in given.items():
        if value not in (None, False, (), []):
            raise typer.BadParameter(f"{reason}", param_hint=flag)


def write_json(path: str, document: dict[str, Any], what: str = "report") -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None
    typer.echo(f"{what} written to {path}", err=True)


def emit(document: dict[str, Any], text: str, fmt: str) -> None:
    if fmt == "json":
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        typer.echo(text, nl=False)


def publish(
    report: dict[str, Any],
    render: Callable[[dict[str, Any]], str],
    *,
    fmt: str,
    output: str | None,
    html: str | None,
    junit: str | None,
    markdown: str | None,
    what: str = "report",
) -> NoReturn:
    """Write the asked-for views and JSON, print the report, exit with its exit code."""
    from decflow.views.outputs import write_views

    write_views(report, html=html, junit=junit, markdown=markdown)
    if output:
        write_json(output, report, what)
    emit(report, render(report), fmt)
    raise typer.Exit(report["exit_code"])
