"""`decflow check CONTRACT -d RECORDS [--baseline B]`: production check of decision logs;
`decflow check CONTRACT --resume RUN [--from-stage STAGE]` finishes a stored check run (or
continues a finished one as a new run)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import typer

from decflow.commands import common
from decflow.commands.common import OutputOptions, reject_options, say_report_stored, with_output


def _check_runner_options(prefect: bool, task_runner: str, dask_address: str | None) -> None:
    if task_runner not in ("thread", "dask"):
        raise typer.BadParameter("must be 'thread' or 'dask'", param_hint="--task-runner")
    if not prefect:
        reject_options(
            "applies only to Prefect runs (--prefect or PREFECT_API_URL)",
            **{"--dask-address": dask_address,
               "--task-runner": None if task_runner == "thread" else "dask"},
        )
    if dask_address and task_runner != "dask":
        raise typer.BadParameter("needs --task-runner dask", param_hint="--dask-address")


def _check_resume_options(dataset: str | None, baseline: str | None, resume: str | None,
                          from_stage: str | None) -> None:
    if resume is None:
        if dataset is None:
            raise typer.BadParameter("is required (or --resume RUN)", param_hint="-d/--dataset")
        if from_stage is not None:
            raise typer.BadParameter("needs --resume RUN", param_hint="--from-stage")
        return
    reject_options("does not apply with --resume (the stored run's baseline is kept)",
                   **{"--baseline": baseline})
    if from_stage is not None:
        from decflow.pipeline.production.summary import CHECK

        CHECK.stage(from_stage)  # an unknown stage before anything runs


def one_blas_thread() -> None:
    """A check never calls BLAS, but importing numpy starts OpenBLAS's thread pool, whose
    worker spins on the other core for ≈ 0.06 CPU s (and again in every worker process):
    300k JSONL records checked in 1.16 s with it, 1.08 s without. A user's own setting
    wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def scan_ahead(args: Sequence[str]) -> None:
    """For a direct `decflow check … -d RECORDS`, start hashing the records before typer
    parses the command line: building the command line (pydantic included) takes ≈ 0.08 s,
    which the hash then overlaps. Only `-d X`, `--dataset X` and `--dataset=X` are
    recognised; help, Prefect runs and anything else start nothing here, and the command
    starts its scan itself."""
    if not args or args[0] != "check" or {"-h", "--help", "--prefect"} & set(args):
        return
    one_blas_thread()  # before the scan imports numpy
    if os.environ.get("PREFECT_API_URL") and "--no-prefect" not in args:
        return
    for option, value in zip(args, [*args[1:], None], strict=True):
        if option == "--":
            return
        if option.startswith("--dataset="):
            value = option.partition("=")[2]
        elif option not in ("-d", "--dataset"):
            continue
        if value:
            from decflow.pipeline.production.run import scan_ahead as start

            start(value)
        return


def register(app: typer.Typer) -> None:
    @app.command("check")
    @with_output()
    def check_command(
        contract: str = typer.Argument(..., help="The decision contract (.yaml/.yml/.json)."),
        dataset: str | None = typer.Option(
            None, "-d", "--dataset", help="Production records: a file, a folder or a glob "
            "(with --resume: where the run's records are now, if they moved)."
        ),
        baseline: str | None = typer.Option(
            None, "--baseline", help="Baseline records, or an earlier check report."
        ),
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        store: str | None = common.STORE_OPTION,
        resume: str | None = typer.Option(
            None, "--resume", help="Finish the stored check run RUN (a finished one: a new "
            "run that continues it)."),
        from_stage: str | None = typer.Option(
            None, "--from-stage", help="With --resume: recompute from this stage on "
            "(aggregates, summary)."),
        prefect: bool | None = typer.Option(
            None, "--prefect/--no-prefect",
            help="Run as a Prefect flow (default: when PREFECT_API_URL is set).",
        ),
        task_runner: str = typer.Option(
            "thread", "--task-runner",
            help="Prefect task runner for the record units: thread or dask.",
        ),
        dask_address: str | None = typer.Option(
            None, "--dask-address", help="An existing Dask scheduler (with --task-runner dask)."
        ),
        *,
        out: OutputOptions,
    ) -> None:
        """Check production decision records against the contract (offline); the check is
        stored as a run, with the records' statistics but never a copy of them."""
        from decflow.commands.contract_run import use_prefect

        one_blas_thread()
        _check_runner_options(use_prefect(prefect), task_runner, dask_address)
        _check_resume_options(dataset, baseline, resume, from_stage)
        if use_prefect(prefect):
            from decflow.flows.production_check import run_production_check_flow
            from decflow.store.store import store_url

            report = run_production_check_flow(
                contract, dataset, baseline, store=store_url(store), fail_on_warn=fail_on_warn,
                resume=resume, from_stage=from_stage, task_runner=task_runner,
                dask_address=dask_address,
            )
        else:
            from decflow.pipeline.production.run import run_check, start_scan

            # first: the input's hash overlaps the imports
            scanning = None if dataset is None else start_scan(dataset)
            from decflow.commands.progress import progress_factory
            from decflow.store.store import open_store
            from decflow.views.stored import write_run_html

            with progress_factory() as factory:
                report = run_check(contract, dataset, baseline, fail_on_warn=fail_on_warn,
                                   store=store, progress=factory("records", None)
                                   if factory else None, scanning=scanning, resume=resume,
                                   from_stage=from_stage)
            write_run_html(open_store(store), report)  # beside report.json, as the flow does
        from decflow.views.outputs import render_text

        code = out.publish(report, render_text, what="production report")
        say_report_stored(report)
        raise typer.Exit(code)
