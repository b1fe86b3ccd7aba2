"""`decflow test`, `decflow fuzz`: a contract run through the stage graph.

Runs in-process by default; as a Prefect flow when PREFECT_API_URL is set or `--prefect`
is given (`--no-prefect` forces the direct runner).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NoReturn

import typer

from decflow.commands import common
from decflow.commands.common import check_format, open_store, publish, reject_options
from decflow.errors import DecflowError

# The run options `decflow stability` shares with test and fuzz.
CONTRACT_ARGUMENT = typer.Argument(..., help="Contract file.")
DATASET_OPTION = typer.Option(None, "-d", "--dataset")
RESUME_OPTION = typer.Option(None, "--resume", help="Finish run RUN.")
FROM_STAGE_OPTION = typer.Option(None, "--from-stage")
PREFECT_OPTION = typer.Option(None, "--prefect/--no-prefect")
TASK_RUNNER_OPTION = typer.Option("thread", "--task-runner")
DASK_ADDRESS_OPTION = typer.Option(None, "--dask-address")


@dataclass
class RunOptions:
    contract: str
    mode: str
    dataset: str | None
    backend: str
    output: str | None
    fmt: str
    max_concurrency: int | None
    fail_on_warn: bool
    healthcheck: bool
    seed: int | None
    properties: list[str]
    minimize: bool | None
    store: str | None
    resume: str | None
    from_stage: str | None
    html: str | None
    junit: str | None
    markdown: str | None
    prefect: bool | None
    task_runner: str
    dask_address: str | None
    plan: bool = False  # print the diagnostics plan and stop, without any backend call


PLAN_OPTION = typer.Option(
    False, "--plan", help="Print the calls each diagnostic will make and the evidence a verdict "
    "needs, then stop (no backend call).",
)


def print_plan(spec: Any, fmt: str, *, to_stderr: bool) -> None:
    """The diagnostics plan: on stdout for --plan (text or JSON), on stderr before a run."""
    import json

    from decflow.pipeline.plan import diagnostics_plan, makes_diagnostic_calls
    from decflow.reports.plan_text import plan_lines

    if to_stderr:
        if makes_diagnostic_calls(spec):
            typer.echo("\n".join(plan_lines(diagnostics_plan(spec))), err=True)
        return
    plan = diagnostics_plan(spec)
    typer.echo(json.dumps(plan, indent=2) if fmt == "json" else "\n".join(plan_lines(plan)))


def use_prefect(flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return bool(os.environ.get("PREFECT_API_URL"))


def build_spec(options: RunOptions, store: Any) -> Any:
    from decflow.pipeline.runner import load_run_record
    from decflow.pipeline.spec import RunSpec, new_run_id

    if options.resume:
        record = load_run_record(store, options.resume)
        stored = RunSpec.from_dict(record["spec"])
        if stored.mode != options.mode:
            raise DecflowError(
                f"run {options.resume} was a '{stored.mode}' run; resume it with the same mode"
            )
        return RunSpec(**{**stored.to_dict(), "properties": stored.properties,
                          "contract_path": options.contract})
    return RunSpec(
        contract_path=options.contract,
        store_url=store.url,
        run_id=new_run_id(),
        mode=options.mode,  # type: ignore[arg-type]
        backend=options.backend,
        dataset=options.dataset,
        seed=options.seed,
        properties=tuple(options.properties) if options.properties else None,
        minimize=options.minimize,
        max_concurrency=options.max_concurrency,
        healthcheck=options.healthcheck,
    )


def check_resume(spec: Any, store: Any) -> None:
    """A resumed run must use the same contract (by hash) as the interrupted one."""
    from decflow.pipeline.runner import load_run_record
    from decflow.pipeline.spec import load_contract_cached

    record = load_run_record(store, spec.run_id)
    current = load_contract_cached(spec.contract_path).hash
    if record["contract_hash"] != current:
        raise DecflowError(
            f"run {spec.run_id} used contract {record['contract_hash']}, but "
            f"{spec.contract_path} now hashes to {current}; start a new run instead"
        )


def execute(options: RunOptions) -> dict[str, Any]:
    from decflow.commands.progress import progress_factory

    store = open_store(options.store)
    spec = build_spec(options, store)
    if options.resume:
        check_resume(spec, store)
    else:
        print_plan(spec, options.fmt, to_stderr=True)
    if use_prefect(options.prefect):
        from decflow.flows.contract_run import run_contract_flow

        return run_contract_flow(
            spec.to_dict(), from_stage=options.from_stage, fail_on_warn=options.fail_on_warn,
            task_runner=options.task_runner, dask_address=options.dask_address,
        )
    from decflow.pipeline.runner import run_contract

    with progress_factory() as progress:
        return run_contract(spec, store, progress=progress, from_stage=options.from_stage,
                            fail_on_warn=options.fail_on_warn)


def finish(options: RunOptions, report: dict[str, Any]) -> NoReturn:
    from decflow.reports.views import render_text

    publish(
        report, render_text, fmt=options.fmt, output=options.output, html=options.html,
        junit=options.junit, markdown=options.markdown,
    )


def _validate(options: RunOptions) -> None:
    check_format(options.fmt)
    if options.mode == "test":
        reject_options(
            "applies only with --all (properties)",
            **{"--seed": options.seed, "-p/--property": options.properties,
               "--minimize/--no-minimize": options.minimize},
        )
    if options.from_stage and not options.resume:
        raise typer.BadParameter("needs --resume RUN", param_hint="--from-stage")
    if options.task_runner not in ("thread", "dask"):
        raise typer.BadParameter("must be 'thread' or 'dask'", param_hint="--task-runner")
    if not use_prefect(options.prefect):
        reject_options(
            "applies only to Prefect runs (--prefect or PREFECT_API_URL)",
            **{"--dask-address": options.dask_address,
               "--task-runner": None if options.task_runner == "thread" else "dask"},
        )
    if options.dask_address and options.task_runner != "dask":
        raise typer.BadParameter("needs --task-runner dask", param_hint="--dask-address")
    if options.plan:
        reject_options(
            "does not apply with --plan (nothing is run)",
            **{"--resume": options.resume, "-o/--output": options.output,
               "--html": options.html, "--junit": options.junit,
               "--markdown": options.markdown},
        )


def plan_or_run(options: RunOptions) -> NoReturn:
    """`--plan`: print the plan and exit 0 without calling anything; otherwise run."""
    if options.plan:
        print_plan(build_spec(options, open_store(options.store)), options.fmt, to_stderr=False)
        raise typer.Exit(0)
    finish(options, execute(options))


def register(app: typer.Typer) -> None:
    def command(mode_name: str) -> Any:
        def run_command(
            contract: str = CONTRACT_ARGUMENT,
            all_: bool = typer.Option(False, "--all", help="Golden gates + properties."),
            dataset: str | None = DATASET_OPTION,
            backend: str = common.BACKEND_OPTION,
            output: str | None = common.OUTPUT_OPTION,
            fmt: str = common.FORMAT_OPTION,
            max_concurrency: int | None = common.MAX_CONCURRENCY_OPTION,
            fail_on_warn: bool = common.FAIL_ON_WARN_OPTION,
            healthcheck: bool = common.HEALTHCHECK_OPTION,
            seed: int | None = typer.Option(None, "--seed", min=0),
            properties: list[str] = typer.Option([], "-p", "--property"),
            minimize: bool | None = typer.Option(None, "--minimize/--no-minimize"),
            store: str | None = common.STORE_OPTION,
            resume: str | None = RESUME_OPTION,
            from_stage: str | None = FROM_STAGE_OPTION,
            html: str | None = common.HTML_OPTION,
            junit: str | None = common.JUNIT_OPTION,
            markdown: str | None = common.MARKDOWN_OPTION,
            prefect: bool | None = PREFECT_OPTION,
            task_runner: str = TASK_RUNNER_OPTION,
            dask_address: str | None = DASK_ADDRESS_OPTION,
            plan: bool = PLAN_OPTION,
        ) -> None:
            if mode_name == "fuzz" and all_:
                raise typer.BadParameter("fuzz always runs properties only", param_hint="--all")
            mode = "all" if all_ else mode_name
            options = RunOptions(
                contract, mode, dataset, backend, output, fmt, max_concurrency, fail_on_warn,
                healthcheck, seed, properties, minimize, store, resume, from_stage, html,
                junit, markdown, prefect, task_runner, dask_address, plan,
            )
            _validate(options)
            plan_or_run(options)

        return run_command

    app.command("test", help="Golden run (--all: + properties and diagnostics).")(command("test"))
    app.command("fuzz", help="Metamorphic properties only (originals still decided).")(
        command("fuzz")
    )
