"""`decflow test`, `decflow fuzz`, `decflow stability`: a contract run through the stage graph.

Runs in-process by default; as a Prefect flow when PREFECT_API_URL is set or `--prefect`
is given (`--no-prefect` forces the direct runner).
"""

from __future__ import annotations

import os
import queue
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import typer

from decflow.commands import common
from decflow.commands.ahead import Ahead, Chunks, after_calls, written_chunks
from decflow.commands.common import (
    OutputOptions,
    Param,
    reject_options,
    say_report_stored,
    with_output,
    with_params,
)
from decflow.report.modes import ModeName, mode_named

if TYPE_CHECKING:
    from decflow.pipeline.contract_run.first_wave import FirstWave

PREFECT_OPTION = typer.Option(
    None, "--prefect/--no-prefect", help="Run as a Prefect flow (default: when PREFECT_API_URL "
    "is set)."
)
TASK_RUNNER_OPTION = typer.Option(
    "thread", "--task-runner", help="Prefect task runner: thread or dask."
)
DASK_ADDRESS_OPTION = typer.Option(
    None, "--dask-address", help="Dask scheduler address (with --task-runner dask)."
)

PLAN_PARAM: Param = ("plan", bool, typer.Option(
    False, "--plan", help="Print the calls each diagnostic will make and the evidence a "
    "verdict needs, then stop (no backend call)."))

SEQUENTIAL_PARAMS: tuple[Param, ...] = (
    ("sequential", bool | None, typer.Option(
        None, "--sequential/--no-sequential", help="Take cases in a seeded random order and "
        "stop calling the backend once every gate is decided (anytime-valid; default: when "
        "the contract has a 'sequential' section).")),
    ("alpha", float | None, typer.Option(
        None, "--alpha", help="With --sequential: the run's chance of a status other than "
        "the full suite's (sequential.alpha, 0.05).")),
    ("max_cases", int | None, typer.Option(
        None, "--max-cases", min=1, help="With --sequential: send at most this many cases.")),
    ("batch", int | None, typer.Option(
        None, "--batch", min=1, max=100_000,
        help="With --sequential: cases per look (default: the concurrency window).")),
    ("order_seed", int | None, typer.Option(
        None, "--order-seed", min=0, help="With --sequential: seed of the case order.")),
    ("zero_limit", float | None, typer.Option(
        None, "--zero-limit",
        help="With --sequential: the share limit-0 gates are judged against (0.02).")),
)

# None when not given: `--resume RUN -b NAME` replaces the stored backend of a run that
# never got an answer, and only when asked (`pipeline.contract_run.resume`).
RUN_BACKEND_OPTION = typer.Option(
    None, "-b", "--backend", help="Backend to call: 'default' or a name under backends "
    "(with --resume: replaces the stored one while the run has no answer).")

# The options of a run, as a table `test`, `fuzz` and `stability` share.
RUN_PARAMS: tuple[Param, ...] = (
    ("contract", str, typer.Argument(..., help="Contract file (.yaml/.yml/.json).")),
    ("dataset", str | None, typer.Option(None, "-d", "--dataset",
                                         help="Golden dataset (overrides the contract's).")),
    ("backend", str | None, RUN_BACKEND_OPTION),
    ("max_concurrency", int | None, common.MAX_CONCURRENCY_OPTION),
    ("fail_on_warn", bool, common.FAIL_ON_WARN_OPTION),
    ("healthcheck", bool, common.HEALTHCHECK_OPTION),
    ("store", str | None, common.STORE_OPTION),
    ("resume", str | None, typer.Option(None, "--resume", help="Finish the stored run RUN.")),
    ("from_stage", str | None, typer.Option(
        None, "--from-stage", help="With --resume: recompute from this stage on.")),
    ("prefect", bool | None, PREFECT_OPTION),
    ("task_runner", str, TASK_RUNNER_OPTION),
    ("dask_address", str | None, DASK_ADDRESS_OPTION),
    PLAN_PARAM,
    *SEQUENTIAL_PARAMS,
    ("allow_paths", list[str], common.ALLOW_PATH_OPTION),
    ("call_cache", str | None, typer.Option(
        None, "--call-cache", help="Serve stored backend answers: read-write, read-only, "
        "refresh (ask again, store the new answers) or off (default: $DECFLOW_CALL_CACHE, "
        "else the contract's evaluation.call_cache, else off).")),
)
PROPERTY_PARAMS: tuple[Param, ...] = (
    ("seed", int | None, typer.Option(None, "--seed", min=0,
                                      help="Seed of the transformations (contract's fuzz.seed).")),
    ("properties", list[str], typer.Option([], "-p", "--property",
                                           help="Run only this property (repeatable).")),
    ("minimize", bool | None, typer.Option(None, "--minimize/--no-minimize",
                                           help="Shrink failing cases (contract's default).")),
)
ALL_PARAM: Param = ("all_", bool, typer.Option(
    False, "--all", help="Golden gates + properties + diagnostics in one report."))


@dataclass
class RunOptions:
    """The options of a contract run command (`test`, `fuzz`, `stability`) as parsed."""

    contract: str
    mode: ModeName
    dataset: str | None
    backend: str | None
    out: OutputOptions
    max_concurrency: int | None
    fail_on_warn: bool
    healthcheck: bool
    store: str | None
    resume: str | None
    from_stage: str | None
    prefect: bool | None
    task_runner: str
    dask_address: str | None
    seed: int | None = None
    properties: tuple[str, ...] = ()
    minimize: bool | None = None
    plan: bool = False  # print the diagnostics plan and stop, without any backend call
    allow_paths: tuple[str, ...] = ()
    sequential: bool | None = None
    alpha: float | None = None
    max_cases: int | None = None
    batch: int | None = None
    order_seed: int | None = None
    zero_limit: float | None = None
    call_cache: str | None = None


def sequential_settings(options: RunOptions,
                        derived_seed: Callable[[], int] | None) -> dict[str, Any] | None:
    """The sequential settings of a new run: the contract's section, then the options
    (`derived_seed`: the order seed when neither sets one, else one is drawn)."""
    from pydantic import ValidationError

    from decflow.contracts.sections import Sequential
    from decflow.pipeline.spec import load_contract_cached

    section = load_contract_cached(options.contract).contract.sequential
    overrides = {"alpha": options.alpha, "max_cases": options.max_cases,
                 "batch": options.batch, "seed": options.order_seed,
                 "zero_limit": options.zero_limit}
    try:
        settings = Sequential.settings(section, options.sequential, overrides, derived_seed)
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = {"seed": "order-seed"}.get(str(error["loc"][0]), str(error["loc"][0]))
        raise typer.BadParameter(error["msg"], param_hint=f"--{flag.replace('_', '-')}") from None
    if settings is None:
        reject_options("applies only with --sequential", **_sequential_flags(options))
    return settings


def _sequential_flags(options: RunOptions) -> dict[str, Any]:
    return {"--alpha": options.alpha, "--max-cases": options.max_cases,
            "--batch": options.batch, "--order-seed": options.order_seed,
            "--zero-limit": options.zero_limit}


def use_prefect(flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return bool(os.environ.get("PREFECT_API_URL"))


def build_spec(options: RunOptions, store: Any) -> Any:
    from decflow.pipeline.contract_run.cache_mode import call_cache_mode, derived_order_seed
    from decflow.pipeline.spec import RunSpec, load_contract_cached
    from decflow.store.runs import new_run_id

    if options.resume:
        # (imported here: a new run sends its first requests before loading polars)
        from decflow.pipeline.contract_run.resume import resumed_spec

        return resumed_spec(store, options.resume, options.contract, options.mode,
                            backend=options.backend, dataset=options.dataset)
    spec = RunSpec(
        contract_path=options.contract, store_url=store.url, run_id=new_run_id(),
        mode=options.mode,
        backend=options.backend or "default", dataset=options.dataset, seed=options.seed,
        properties=options.properties or None, minimize=options.minimize,
        max_concurrency=options.max_concurrency, healthcheck=options.healthcheck,
        allow_paths=tuple(options.allow_paths),
        call_cache=call_cache_mode(options.call_cache,
                                   load_contract_cached(options.contract).contract),
    )
    # (after the rest: the order seed may derive from the spec's contract, dataset and mode)
    return replace(spec, sequential=sequential_settings(options, derived_order_seed(spec)))


def print_plan(spec: Any, fmt: str, *, to_stderr: bool) -> None:
    """The diagnostics plan: on stdout for --plan (text or JSON), on stderr before a run."""
    import json

    from decflow.pipeline.contract_run.derive import makes_diagnostic_calls

    if to_stderr and not makes_diagnostic_calls(spec):
        return  # nothing to plan: the planner (power curves, persona plans) is not loaded
    from decflow.pipeline.plan import diagnostics_plan
    from decflow.views.plan_text import plan_lines

    if to_stderr:
        typer.echo("\n".join(plan_lines(diagnostics_plan(spec))), err=True)
        return
    plan = diagnostics_plan(spec)
    typer.echo(json.dumps(plan, indent=2) if fmt == "json" else "\n".join(plan_lines(plan)))


def execute(options: RunOptions) -> dict[str, Any]:
    from decflow.pipeline.contract_run import first_wave
    from decflow.store.store import open_store

    store = open_store(options.store)
    spec = build_spec(options, store)
    prefect = use_prefect(options.prefect)
    # a plain new run sends its first requests now, before its tables are built
    first = None if options.resume or prefect else first_wave.start(spec)
    try:
        return _execute(options, store, spec, prefect, first)
    finally:
        if first is not None:
            first.close()  # (taken by the call stage, unless the run stopped before it)


def _execute(options: RunOptions, store: Any, spec: Any, prefect: bool,
             first: FirstWave | None) -> dict[str, Any]:
    from decflow.commands.progress import progress_factory
    from decflow.pipeline.contract_run.runner import run_contract

    if not options.resume:
        print_plan(spec, options.out.fmt, to_stderr=True)
    elif spec.parent:
        typer.echo(f"run {spec.parent} finished; this is a new run {spec.run_id} that "
                   f"continues it (run {spec.parent} is left as it is)", err=True)
    if prefect:
        from decflow.flows.contract_run import run_contract_flow

        return run_contract_flow(
            spec.to_dict(), from_stage=options.from_stage, fail_on_warn=options.fail_on_warn,
            task_runner=options.task_runner, dask_address=options.dask_address,
        )
    # what the run needs after its calls is prepared while the backend is called
    chunks: Chunks = queue.SimpleQueue()
    later = Ahead(after_calls(spec, store, chunks), chunks)
    try:
        with progress_factory() as progress, written_chunks(chunks):
            report = run_contract(
                spec, store, progress=progress and later.progress(progress),
                from_stage=options.from_stage, fail_on_warn=options.fail_on_warn,
                on_stage=later.on_stage, first_wave=first,
            )
    finally:
        later.join()
    from decflow.views.stored import write_run_html  # (not needed before the calls)

    write_run_html(store, report)  # as the flow's report task does
    return report


def validate_options(options: RunOptions) -> None:
    if not mode_named(options.mode).fills("properties"):
        reject_options(
            "applies only with --all (properties)",
            **{"--seed": options.seed, "-p/--property": options.properties,
               "--minimize/--no-minimize": options.minimize},
        )
    if options.resume:
        reject_options("does not apply with --resume (the stored run's settings are kept)",
                       **{"--sequential/--no-sequential": options.sequential,
                          "--call-cache": options.call_cache,
                          **_sequential_flags(options)})
    if options.from_stage and not options.resume:
        raise typer.BadParameter("needs --resume RUN", param_hint="--from-stage")
    if options.from_stage:
        from decflow.pipeline.contract_run.runner import CONTRACT_RUN

        CONTRACT_RUN.stage(options.from_stage)  # before a continuing run is announced
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
            **{"--resume": options.resume, **options.out.given()},
        )


def run_and_print(options: RunOptions) -> None:
    """`--plan`: print the plan and exit 0 without calling anything; otherwise run."""
    from decflow.store.store import open_store

    validate_options(options)
    if options.plan:
        print_plan(build_spec(options, open_store(options.store)), options.out.fmt,
                   to_stderr=False)
        raise typer.Exit(0)
    report = execute(options)
    from decflow.views.outputs import render_text  # imported during the run's calls

    code = options.out.publish(report, render_text)
    say_report_stored(report)
    # Freeing a report of 20k cases object by object as the exit unwinds costs ~20 ms;
    # `decflow.cli._exit` then ends the process without freeing anything. One slot: a
    # process running many commands (the tests) keeps only the last report.
    _LAST_REPORT[:] = [report]
    raise typer.Exit(code)


_LAST_REPORT: list[dict[str, Any]] = []


def register(app: typer.Typer) -> None:
    @app.command("test", help="Golden run (--all: + properties and diagnostics).")
    @with_output()
    @with_params((*RUN_PARAMS, ALL_PARAM, *PROPERTY_PARAMS))
    def test(all_: bool, properties: list[str], **values: Any) -> None:
        run_and_print(RunOptions(mode="all" if all_ else "test",
                                 properties=tuple(properties), **values))

    @app.command("fuzz", help="Metamorphic properties only (originals still decided).")
    @with_output()
    @with_params((*RUN_PARAMS, *PROPERTY_PARAMS))
    def fuzz(properties: list[str], **values: Any) -> None:
        run_and_print(RunOptions(mode="fuzz", properties=tuple(properties), **values))

    @app.command("stability", help="Rerun stability meter and blindness only (no properties).")
    @with_output()
    @with_params(RUN_PARAMS)
    def stability(**values: Any) -> None:
        run_and_print(RunOptions(mode="stability", **values))
