"""`decflow runs`: list stored runs; `runs show ID`; `runs accept ID` (accepted baseline)."""

from __future__ import annotations

import json

import typer

from decflow.commands import common


def register(app: typer.Typer) -> None:
    runs = typer.Typer(help="Stored runs: list, show, accept as baseline.",
                       invoke_without_command=True, no_args_is_help=False)
    app.add_typer(runs, name="runs")

    @runs.callback()
    def runs_list(ctx: typer.Context, store: str | None = common.STORE_OPTION) -> None:
        """List stored runs (id, decision, mode, backend, status, time)."""
        if ctx.invoked_subcommand is not None:
            return
        from decflow.store.runs import list_runs
        from decflow.store.store import open_store

        records = list_runs(open_store(store))
        if not records:
            typer.echo("no runs in the store")
            return
        for r in records:
            typer.echo(f"{r['run_id']}  {r['decision']:<24} {r['mode']:<9} {r['backend']:<16} "
                       f"{r['status']:<8} {r['updated_at']}")

    @runs.command("show")
    def runs_show(run_id: str, store: str | None = common.STORE_OPTION) -> None:
        """Print a run's record (stages, hashes, timings, status) as JSON."""
        from decflow.store.runs import read_run_record
        from decflow.store.store import open_store

        typer.echo(json.dumps(read_run_record(open_store(store), run_id), indent=2))

    @runs.command("accept")
    def runs_accept(run_id: str, store: str | None = common.STORE_OPTION) -> None:
        """Mark a run as the accepted baseline for its decision and backend."""
        from decflow.store.runs import accept_run
        from decflow.store.store import open_store

        entry = accept_run(open_store(store), run_id)
        typer.echo(f"accepted {run_id} as the baseline for {entry['decision']} "
                   f"(backend {entry['backend']})")
