"""`decflow diff BASELINE CANDIDATE [-c CONTRACT]`: regression diff of two runs or reports."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import check_format, publish


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_command(
        baseline: str = typer.Argument(
            ..., help="Baseline report file or run id (a contract run or a check run), or "
            "'accepted' (the accepted run)."
        ),
        candidate: str = typer.Argument(..., help="Candidate report file or run id."),
        contract: str | None = typer.Option(
            None, "-c", "--contract", help="Gate with this contract's regression settings."
        ),
        segment_by: list[str] = typer.Option(
            [], "-s", "--segment-by", help="Metadata key to segment by (repeatable)."
        ),
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        html: str | None = common.HTML_OPTION,
        junit: str | None = common.JUNIT_OPTION,
        markdown: str | None = common.MARKDOWN_OPTION,
    ) -> None:
        """Compare two contract runs case by case and gate the regression; or two check
        runs: the later one's drift against the earlier."""
        from decflow.pipeline.regression import run_diff
        from decflow.store.store import open_store
        from decflow.views.outputs import render_text  # a diff of check runs is a check

        check_format(fmt)
        report = run_diff(baseline, candidate, open_store(store), contract_path=contract,
                          segment_by=segment_by or None, fail_on_warn=fail_on_warn)
        raise typer.Exit(publish(
            report, render_text, fmt=fmt, output=output, html=html, junit=junit,
            markdown=markdown, what="diff",
        ))
