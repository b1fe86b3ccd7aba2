"""`decflow probe --agent MOD:FUNC --inputs FILE`: meter, blindness and relations on an
agent callable, no contract needed. Exit 0 clean, 1 blind or a relation violated, 2 when
the probe could not run (bad module path, not callable, empty or duplicate inputs). The
agent runs in a worker process (`decflow.probe.agents.AgentProcess`)."""

from __future__ import annotations

import typer

from decflow import startup
from decflow.commands import common
from decflow.commands.common import OutputOptions, emit, say_stored, with_output, write_json

LAYER_HELP = "Layer the meter and relations compare: verdict, text or tools."


def register(app: typer.Typer) -> None:
    @app.command("probe", help="Meter, blindness and relations on an agent callable.")
    @with_output(views=False)
    def probe_command(
        agent: str = typer.Option(..., "--agent", help="module:function giving the agent."),
        inputs: str = typer.Option(..., "--inputs", help="Text file, one input per line."),
        repeats: int = typer.Option(5, "--repeats", help="Reruns per input (k >= 2)."),
        epsilon: float = typer.Option(0.01, "--epsilon", help="Flip-rate tolerance ε."),
        threshold: float = typer.Option(0.9, "--threshold", help="Blindness skew threshold."),
        layer: str = typer.Option("verdict", "--layer", help=LAYER_HELP),
        no_reuse: bool = typer.Option(False, "--no-reuse",
                                      help="Independent draws for blindness and sources."),
        store: str | None = common.STORE_OPTION,
        write_contract: str | None = typer.Option(
            None, "--write-contract", help="Write decflow.yaml + cases.jsonl into this folder."
        ),
        call_timeout: float | None = typer.Option(
            None, "--call-timeout",
            help="Seconds an agent call may take before it counts as a timeout "
            "(default: $DECFLOW_CALL_TIMEOUT, else 120)."),
        *,
        out: OutputOptions,
    ) -> None:
        from decflow.probe.agents import AgentProcess
        from decflow.probe.loading import read_inputs
        from decflow.probe.runner import probe
        from decflow.store.store import open_store, store_url
        from decflow.views.probe_text import render_probe
        from decflow.views.stored import write_run_html

        inputs_list = read_inputs(inputs)
        startup.end()  # an agent may take long: the collector back to its defaults
        result = probe(
            AgentProcess(agent, call_timeout), inputs_list, repeats=repeats, epsilon=epsilon,
            blindness_threshold=threshold, layer=layer, reuse_calls=not no_reuse,
            store=store_url(store), name=agent,
        )
        report = result.to_dict()
        opened = open_store(store)
        write_run_html(opened, report)  # beside report.json, as every stored run
        if write_contract:
            path = result.write_contract(write_contract)
            typer.echo(f"contract written to {path}", err=True)
        if out.output:
            write_json(out.output, report)
        emit(report, render_probe(report), out.fmt)
        say_stored(result.run_id, opened.location, html=True)
        raise typer.Exit(result.exit_code)
