"""Options and output handling shared by the commands.

Options several commands take are declared once here, so their flags, defaults and help
agree. Commands with many options declare them as a table (`Param`) and get their typer
signature from `with_params`, instead of a function with twenty parameters. Every command
that prints a report takes the same output options (`OutputOptions`: `-f`, `-o` and a file
per registered view format), added to it by `with_output`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from decflow.errors import DecflowError
from decflow.redaction import redact
from decflow.views.formats import VIEW_FORMATS

FORMATS = ("text", "json")

BACKEND_OPTION = typer.Option(
    "default", "-b", "--backend", help="Backend to call: 'default' or a name under backends."
)
FAIL_ON_WARN_OPTION = typer.Option(False, "--fail-on-warn", help="Exit 1 on WARN too.")
FORMAT_OPTION = typer.Option("text", "-f", "--format", help="Output: text or json.")
HEALTHCHECK_OPTION = typer.Option(
    True, "--healthcheck/--no-healthcheck", help="Check the backend before the first call."
)
MAX_CONCURRENCY_OPTION = typer.Option(
    None, "--max-concurrency", min=1, max=256, help="Backend calls in flight (1-256)."
)
OUTPUT_OPTION = typer.Option(None, "-o", "--output", help="Also write the JSON report here.")
ALLOW_PATH_OPTION = typer.Option(
    [], "--allow-path", help="A folder outside the contract's own whose files the contract "
    "may name (repeatable; also $DECFLOW_ALLOW_PATH).")
STORE_OPTION = typer.Option(
    None, "--store", help="Store URL (default $DECFLOW_STORE, else .decflow)."
)

Param = tuple[str, Any, Any]  # (parameter name, type, typer.Option/Argument)


def with_params(params: Sequence[Param]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give `body(**values)` the typer signature of `params` (one keyword per entry)."""

    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        def command(**values: Any) -> None:
            body(**values)

        command.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                              annotation=annotation)
            for name, annotation, option in params
        ])
        command.__doc__ = body.__doc__
        command.__name__ = body.__name__
        return command

    return wrap


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
        target.write_text(json.dumps(redact(document), indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None
    typer.echo(f"{what} written to {path}", err=True)


def emit(document: dict[str, Any], text: str, fmt: str) -> None:
    if fmt == "json":
        from decflow.untrusted import json_for_terminal

        typer.echo(json_for_terminal(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        typer.echo(text, nl=False)


def say_stored(run_id: str | None, store: str | None, *, html: bool = False) -> None:
    """The last line of every command that stores something: where its result went, and
    its HTML view when it has one (on stderr, so stdout can stay JSON)."""
    if run_id and store:
        from decflow.store.runs import report_path
        from decflow.views.stored import html_path

        root, stored = store.rstrip("/"), report_path(run_id)
        shown = f" (HTML report: {root}/{html_path(stored)})" if html else ""
        typer.echo(f"run {run_id} stored: {root}/{stored}{shown}", err=True)


def say_report_stored(report: dict[str, Any]) -> None:
    """`say_stored` for a run whose report.html was written beside its report."""
    run = report.get("run") or {}
    say_stored(run.get("id"), run.get("store"), html=True)


@dataclass(frozen=True)
class OutputOptions:
    """Where a command's report goes: printed as text or JSON (`fmt`), the JSON also to
    `output`, and a file per view format given one (`files`: format name -> path)."""

    fmt: str = "text"
    output: str | None = None
    files: Mapping[str, str | None] = field(default_factory=dict)

    def given(self) -> dict[str, Any]:
        """The file options by flag (for `reject_options`)."""
        return {"-o/--output": self.output,
                **{VIEW_FORMATS.get(name).option: path for name, path in self.files.items()}}

    def publish(
        self, report: dict[str, Any], render: Callable[[dict[str, Any]], str],
        what: str = "report",
    ) -> int:
        """Write the asked-for views and JSON, print the report; returns its exit code."""
        from decflow.views.outputs import write_views

        write_views(report, **self.files)
        if self.output:
            write_json(self.output, report, what)
        emit(report, render(report), self.fmt)
        code: int = report["exit_code"]
        return code


def output_params(*, views: bool = True) -> tuple[Param, ...]:
    """`-o` and `-f`, and with `views` one `--<format> FILE` per registered view format."""
    files: tuple[Param, ...] = tuple(
        (found.name, str | None, typer.Option(None, found.option, help=found.help))
        for found in VIEW_FORMATS.entries()
    ) if views else ()
    return (("output", str | None, OUTPUT_OPTION), ("fmt", str, FORMAT_OPTION), *files)


def output_options(values: dict[str, Any]) -> OutputOptions:
    """Take the values of `output_params` out of a command's values, checked."""
    files = {found.name: values.pop(found.name) for found in VIEW_FORMATS.entries()
             if found.name in values}
    return OutputOptions(check_format(values.pop("fmt")), values.pop("output"), files)


def with_output(
    *, views: bool = True
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the output options to a typer command (after its own), passed to it as `out`."""

    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(body, eval_str=True).parameters.values()
               if p.name != "out"]

        def command(**values: Any) -> None:
            body(out=output_options(values), **values)

        command.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
            *own,
            *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                annotation=annotation)
              for name, annotation, option in output_params(views=views)),
        ])
        command.__doc__ = body.__doc__
        command.__name__ = body.__name__
        return command

    return wrap
