"""`decflow check CONTRACT -d RECORDS [--baseline B]`: production check of decision logs."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import check_format, publish, say_report_stored


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
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        html: str | None = common.HTML_OPTION,
        junit: str | None = common.JUNIT_OPTION,
        markdown: str | None = common.MARKDOWN_OPTION,
        store: str | None = typer.Option(
            None, "--store", help="Publish the records/aggregates stages to this store."
        ),
        prefect: bool | None = typer.Option(
            None, "--prefect/--no-prefect",
            help="Run as a Prefect flow (default: when PREFECT_API_URL is set).",
        ),
    ) -> None:
        """Check production decision records against the contract (offline)."""
        from decflow.commands.contract_run import use_prefect
        from decflow.views.production_text import render_check

        check_format(fmt)
        if use_prefect(prefect):
            from decflow.flows.production_check import run_production_check_flow
            from decflow.store.store import store_url

            report = run_production_check_flow(
                contract, dataset, baseline, store=store_url(store), fail_on_warn=fail_on_warn,
            )
        else:
            from decflow.commands.progress import progress_factory
            from decflow.pipeline.production.run import run_check

            with progress_factory() as factory:
                report = run_check(contract, dataset, baseline, fail_on_warn=fail_on_warn,
                                   store=store, progress=factory("records", None)
                                   if factory else None)
            if report.get("run"):  # stored as a run: its HTML beside it, as the flow does
                from decflow.store.store import open_store
                from decflow.views.stored import write_run_html

                write_run_html(open_store(store), report)
        code = publish(
            report, render_check, fmt=fmt, output=output, html=html, junit=junit,
            markdown=markdown, what="production report",
        )
        say_report_stored(report)
        raise typer.Exit(code)
