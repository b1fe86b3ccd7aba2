"""`decflow stability CONTRACT`: the rerun meter and blindness only.

Each case is decided `diagnostics.stability.repeats` times (the contract's section, or its
defaults when there is none); the report carries the meter, blindness and oracle guidance,
with the golden metrics of the first draws for context but no golden gates.
"""

from __future__ import annotations

from typing import Any

import typer

from decflow.commands.common import (
    BACKEND_OPTION,
    FAIL_ON_WARN_OPTION,
    FORMAT_OPTION,
    HEALTHCHECK_OPTION,
    HTML_OPTION,
    JUNIT_OPTION,
    MARKDOWN_OPTION,
    MAX_CONCURRENCY_OPTION,
    OUTPUT_OPTION,
    STORE_OPTION,
)
from decflow.commands.contract_run import (
    CONTRACT_ARGUMENT,
    DASK_ADDRESS_OPTION,
    DATASET_OPTION,
    FROM_STAGE_OPTION,
    PREFECT_OPTION,
    RESUME_OPTION,
    TASK_RUNNER_OPTION,
    RunOptions,
    _validate,
    execute,
    finish,
)


def register(app: typer.Typer) -> None:
    @app.command("stability", help="Rerun stability meter and blindness only (no properties).")
    def stability(
        contract: str = CONTRACT_ARGUMENT,
        dataset: str | None = DATASET_OPTION,
        backend: str = BACKEND_OPTION,
        output: str | None = OUTPUT_OPTION,
        fmt: str = FORMAT_OPTION,
        max_concurrency: int | None = MAX_CONCURRENCY_OPTION,
        fail_on_warn: bool = FAIL_ON_WARN_OPTION,
        healthcheck: bool = HEALTHCHECK_OPTION,
        store: str | None = STORE_OPTION,
        resume: str | None = RESUME_OPTION,
        from_stage: str | None = FROM_STAGE_OPTION,
        html: str | None = HTML_OPTION,
        junit: str | None = JUNIT_OPTION,
        markdown: str | None = MARKDOWN_OPTION,
        prefect: bool | None = PREFECT_OPTION,
        task_runner: str = TASK_RUNNER_OPTION,
        dask_address: str | None = DASK_ADDRESS_OPTION,
    ) -> None:
        options = RunOptions(
            contract, "stability", dataset, backend, output, fmt, max_concurrency,
            fail_on_warn, healthcheck, None, [], None, store, resume, from_stage, html, junit,
            markdown, prefect, task_runner, dask_address,
        )
        _validate(options)
        report: dict[str, Any] = execute(options)
        finish(options, report)
