"""`decflow diff BASELINE CANDIDATE [-c CONTRACT]`: regression diff of two runs or reports."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import OutputOptions, with_output


def register(app: typer.Typer) -> None:
    @app.command("diff")
    @with_output()
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
        noise_reruns: int = typer.Option(
            0, "--noise-reruns", min=0, metavar="K",
            help="Measure the candidate's rerun noise first: re-send its stored requests K "
                 "times (a child run, resumable) when it has no reruns yet.",
        ),
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        *,
        out: OutputOptions,
    ) -> None:
        """Compare two contract runs case by case and gate the regression; or two check
        runs: the later one's drift against the earlier."""
        from decflow.commands.progress import progress_factory
        from decflow.pipeline.regression import run_diff
        from decflow.store.store import open_store
        from decflow.views.outputs import render_text  # a diff of check runs is a check

        with progress_factory(enabled=noise_reruns > 0) as progress:
            report = run_diff(baseline, candidate, open_store(store), contract_path=contract,
                              segment_by=segment_by or None, fail_on_warn=fail_on_warn,
                              noise_reruns=noise_reruns, progress=progress)
        raise typer.Exit(out.publish(report, render_text, what="diff"))
