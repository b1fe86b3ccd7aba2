"""`decflow check CONTRACT -d RECORDS [--baseline B]`: production check of decision logs."""

from __future__ import annotations

from typing import Any

import typer

from decflow.commands.common import check_format, emit, write_json


def run_check(
    contract_path: str,
    dataset: str,
    baseline: str | None = None,
    *,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """Load the contract and check the records at `dataset` (a file, folder or glob of
    .jsonl/.json/.parquet), optionally against `baseline` (records or an earlier check
    report). Returns the check report; raises `DecflowError` (exit 2) on bad input."""
    from decflow.contracts import load_contract
    from decflow.pipeline.check import check_records

    loaded = load_contract(contract_path)
    return check_records(
        loaded.contract,
        dataset,
        baseline,
        contract_path=contract_path,
        contract_hash=loaded.hash,
        fail_on_warn=fail_on_warn,
    )


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_command(
        contract: str = typer.Argument(..., help="The decision contract (.yaml/.yml/.json)."),
        dataset: str = typer.Option(
            ..., "-d", "--dataset", help="Production records: a file, a folder or a glob."
        ),
        baseline: str | None = typer.Option(
            None, "--baseline", help="Baseline records, or an earlier check report."
        ),
        output: str | None = typer.Option(None, "-o", "--output"),
        fmt: str = typer.Option("text", "-f", "--format"),
        fail_on_warn: bool = typer.Option(False, "--fail-on-warn"),
        html: str | None = typer.Option(None, "--html"),
        junit: str | None = typer.Option(None, "--junit"),
        markdown: str | None = typer.Option(None, "--markdown"),
    ) -> None:
        """Check production decision records against the contract (offline)."""
        from decflow.reports.check_text import render_check
        from decflow.reports.views import write_views

        check_format(fmt)
        report = run_check(contract, dataset, baseline, fail_on_warn=fail_on_warn)
        write_views(report, html=html, junit=junit, markdown=markdown)
        if output:
            write_json(output, report, "production report")
        emit(report, render_check(report), fmt)
        raise typer.Exit(report["exit_code"])
