"""`decflow check CONTRACT -d RECORDS [--baseline B]`: production check of decision logs."""

from __future__ import annotations

import sys
from typing import Any

import typer

from decflow.commands import common
from decflow.commands.common import check_format, publish


def run_check(
    contract_path: str,
    dataset: str,
    baseline: str | None = None,
    *,
    fail_on_warn: bool = False,
    store: str | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Load the contract and check the records at `dataset` (a file, folder or glob of
    .jsonl/.json/.parquet), optionally against `baseline` (records or an earlier check
    report). Without `store` everything runs in memory, one batch at a time; with a store
    URL the `records` and `aggregates` stages are published there (cached by contract and
    input bytes) and large inputs are named in the report by their records artifact.
    Returns the check report; raises `DecflowError` (exit 2) on bad input."""
    from decflow.commands.progress import progress_factory
    from decflow.contracts import load_contract
    from decflow.pipeline import check as stages

    loaded = load_contract(contract_path)
    contract = loaded.contract
    identity = {"contract_path": contract_path, "contract_hash": loaded.hash}
    with progress_factory(show_progress) as factory:
        update = factory("records", None) if factory else None
        if store is None:
            return stages.check_records(
                contract, dataset, baseline, fail_on_warn=fail_on_warn, progress=update,
                **identity,
            )
        return _check_in_store(store, loaded, identity, dataset, baseline, fail_on_warn, update)


def _check_in_store(
    store: str,
    loaded: Any,
    identity: dict[str, str],
    dataset: str,
    baseline: str | None,
    fail_on_warn: bool,
    update: Any,
) -> dict[str, Any]:
    from decflow.pipeline import check as stages
    from decflow.store.store import Store

    contract = loaded.contract
    opened = Store(store)
    print(f"decflow: record statistics are stored in {opened.location}/stages", file=sys.stderr)
    plan = stages.plan_source(dataset)
    outcomes = stages.stage_records(opened, contract, loaded.hash, plan, progress=update)
    aggregates = stages.stage_aggregates(opened, contract, loaded.hash, plan, outcomes)
    return stages.summarize(
        contract,
        stages.stored_aggregates(opened, contract, aggregates, shown_path=dataset),
        None if baseline is None else stages.load_baseline(contract, baseline),
        fail_on_warn=fail_on_warn,
        **identity,
    )


def _check_runner_options(prefect: bool, task_runner: str, dask_address: str | None) -> None:
    if task_runner not in ("thread", "dask"):
        raise typer.BadParameter("must be 'thread' or 'dask'", param_hint="--task-runner")
    if not prefect:
        common.reject_options(
            "applies only to Prefect runs (--prefect or PREFECT_API_URL)",
            **{"--dask-address": dask_address,
               "--task-runner": None if task_runner == "thread" else "dask"},
        )
    if dask_address and task_runner != "dask":
        raise typer.BadParameter("needs --task-runner dask", param_hint="--dask-address")


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
        task_runner: str = typer.Option(
            "thread", "--task-runner",
            help="Prefect task runner for the record units: thread or dask.",
        ),
        dask_address: str | None = typer.Option(
            None, "--dask-address", help="An existing Dask scheduler (with --task-runner dask)."
        ),
    ) -> None:
        """Check production decision records against the contract (offline)."""
        from decflow.commands.contract_run import use_prefect
        from decflow.reports.check_text import render_check

        check_format(fmt)
        _check_runner_options(use_prefect(prefect), task_runner, dask_address)
        if use_prefect(prefect):
            from decflow.flows.production_check import run_production_check_flow

            report = run_production_check_flow(
                contract, dataset, baseline, store=common.store_url(store),
                fail_on_warn=fail_on_warn, task_runner=task_runner, dask_address=dask_address,
            )
        else:
            report = run_check(contract, dataset, baseline, fail_on_warn=fail_on_warn,
                               store=store)
        publish(
            report, render_check, fmt=fmt, output=output, html=html, junit=junit,
            markdown=markdown, what="production report",
        )
