"""`decflow stability CONTRACT`: the rerun meter and blindness only.

Each case is decided `diagnostics.stability.repeats` times (the contract's section, or its
defaults when there is none); the report carries the meter, blindness and oracle guidance,
with the golden metrics of the first draws for context but no golden gates.
"""

from __future__ import annotations

import typer

from decflow.commands import common, contract_run
from decflow.commands.contract_run import RunOptions, _validate, plan_or_run


def register(app: typer.Typer) -> None:
    @app.command("stability", help="Rerun stability meter and blindness only (no properties).")
    def stability(
        contract: str = contract_run.CONTRACT_ARGUMENT,
        dataset: str | None = contract_run.DATASET_OPTION,
        backend: str = common.BACKEND_OPTION,
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        max_concurrency: int | None = common.MAX_CONCURRENCY_OPTION,
        fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
        healthcheck: bool = common.HEALTHCHECK_OPTION,
        store: str | None = common.STORE_OPTION,
        resume: str | None = contract_run.RESUME_OPTION,
        from_stage: str | None = contract_run.FROM_STAGE_OPTION,
        html: str | None = common.HTML_OPTION,
        junit: str | None = common.JUNIT_OPTION,
        markdown: str | None = common.MARKDOWN_OPTION,
        prefect: bool | None = contract_run.PREFECT_OPTION,
        task_runner: str = contract_run.TASK_RUNNER_OPTION,
        dask_address: str | None = contract_run.DASK_ADDRESS_OPTION,
        plan: bool = contract_run.PLAN_OPTION,
    ) -> None:
        options = RunOptions(
            contract, "stability", dataset, backend, output, fmt, max_concurrency,
            fail_on_warn, healthcheck, None, [], None, store, resume, from_stage, html, junit,
            markdown, prefect, task_runner, dask_address, plan,
        )
        _validate(options)
        plan_or_run(options)
