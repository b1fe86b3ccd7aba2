"""`decflow stability CONTRACT`: the rerun meter and blindness only.

Each case is decided `diagnostics.stability.repeats` times (the contract's section, or its
defaults when there is none); the report carries the meter, blindness and oracle guidance,
with the golden metrics of the first draws for context but no golden gates.
"""

from __future__ import annotations

from typing import Any

import typer

from decflow.commands.contract_run import RunOptions, _validate, execute, finish


def register(app: typer.Typer) -> None:
    @app.command("stability", help="Rerun stability meter and blindness only (no properties).")
    def stability(
        contract: str = typer.Argument(..., help="Contract file."),
        dataset: str | None = typer.Option(None, "-d", "--dataset"),
        backend: str = typer.Option("default", "-b", "--backend"),
        output: str | None = typer.Option(None, "-o", "--output", help="Write JSON here."),
        fmt: str = typer.Option("text", "-f", "--format", help="text or json."),
        max_concurrency: int | None = typer.Option(None, "--max-concurrency", min=1, max=256),
        fail_on_warn: bool = typer.Option(False, "--fail-on-warn"),
        healthcheck: bool = typer.Option(True, "--healthcheck/--no-healthcheck"),
        store: str | None = typer.Option(None, "--store", help="Store URL (.decflow)."),
        resume: str | None = typer.Option(None, "--resume", help="Finish run RUN."),
        from_stage: str | None = typer.Option(None, "--from-stage"),
        html: str | None = typer.Option(None, "--html"),
        junit: str | None = typer.Option(None, "--junit"),
        markdown: str | None = typer.Option(None, "--markdown"),
        prefect: bool | None = typer.Option(None, "--prefect/--no-prefect"),
        task_runner: str = typer.Option("thread", "--task-runner"),
        dask_address: str | None = typer.Option(None, "--dask-address"),
    ) -> None:
        options = RunOptions(
            contract, "stability", dataset, backend, output, fmt, max_concurrency,
            fail_on_warn, healthcheck, None, [], None, store, resume, from_stage, html, junit,
            markdown, prefect, task_runner, dask_address,
        )
        _validate(options)
        report: dict[str, Any] = execute(options)
        finish(options, report)
