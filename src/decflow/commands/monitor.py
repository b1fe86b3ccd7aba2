"""`decflow monitor CONTRACT -d SOURCE [--labels SOURCE] [--baseline B|accepted]`:
stateful production monitoring of a decision's logs."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import OutputOptions, say_report_stored, with_output


def register(app: typer.Typer) -> None:
    @app.command("monitor")
    @with_output()
    def monitor_command(
        contract: str = typer.Argument(..., help="The decision contract (.yaml/.yml/.json)."),
        dataset: str = typer.Option(
            ..., "-d", "--dataset",
            help="The production records: a folder of partitions, a glob or a file, local "
            "or s3://."),
        labels: str | None = typer.Option(
            None, "--labels",
            help="Outcomes that arrived later (id, outcome, optional timestamp): a folder, "
            "a glob or a file."),
        baseline: str | None = typer.Option(
            None, "--baseline",
            help="What drift and the harmful-shift alarm are measured against: records, a "
            "check report, a check run or 'accepted' (default: the monitor's own)."),
        store: str | None = common.STORE_OPTION,
        prefect: bool | None = typer.Option(
            None, "--prefect/--no-prefect",
            help="Run as the production_monitor flow (default: when PREFECT_API_URL is set)."),
        *,
        out: OutputOptions,
    ) -> None:
        """Check the partitions of SOURCE not checked before for this decision, as windows
        by record timestamp, join labels that arrived, and alarm on a harmful shift. Exit 0
        OK or WARN, 1 ALARM or a failing window, 2 could not run."""
        from decflow.commands.contract_run import use_prefect

        if use_prefect(prefect):
            from decflow.flows.production_monitor import run_production_monitor_flow
            from decflow.store.store import store_url

            report = run_production_monitor_flow(contract, dataset, labels=labels,
                                                 baseline=baseline, store=store_url(store))
        else:
            from decflow.pipeline.monitor.run import run_monitor
            from decflow.store.store import open_store
            from decflow.views.stored import write_run_html, write_window_html

            report = run_monitor(contract, dataset, labels=labels, baseline=baseline,
                                 store=store)
            opened = open_store(store)  # the views beside the reports, as the flow writes them
            write_run_html(opened, report)
            write_window_html(opened, report)
        from decflow.views.outputs import render_text

        code = out.publish(report, render_text, what="monitor report")
        say_report_stored(report)
        raise typer.Exit(code)
