"""`decflow report REPORT_OR_RUN [-c CONTRACT]`: show a stored run, or re-gate it offline."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import OutputOptions, with_output


def register(app: typer.Typer) -> None:
    @app.command("report")
    @with_output()
    def report_command(
        target: str = typer.Argument(..., help="A report.json file or a run id."),
        contract: str | None = typer.Option(
            None, "-c", "--contract", help="Re-gate offline with this contract."
        ),
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        *,
        out: OutputOptions,
    ) -> None:
        """Show a stored run or report; with -c, re-gate it without calling any backend."""
        from decflow.pipeline.stored.regate import show_or_regate
        from decflow.store.store import open_store
        from decflow.views.outputs import render_text

        report = show_or_regate(target, open_store(store), contract, fail_on_warn=fail_on_warn)
        raise typer.Exit(out.publish(report, render_text))
