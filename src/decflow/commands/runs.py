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
        """List stored runs (id, accepted baseline, decision, mode, backend, status, time)."""
        if ctx.invoked_subcommand is not None:
            return
        from decflow.store.runs import accepted_run, damaged_files, list_runs
        from decflow.store.store import open_store
        from decflow.untrusted import escape

        opened = open_store(store)
        records = list_runs(opened)
        for record in records:  # a report edited since the run: shown, never trusted
            damaged = damaged_files(opened, record)
            if damaged:
                record["status"] = f"damaged ({', '.join(damaged)} edited since the run)"
        if not records:
            typer.echo(f"no runs in the store {opened.location}")
            return
        rows: list[tuple[str, ...]] = [
            ("run", "accepted", "decision", "mode", "backend", "status", "updated (UTC)")
        ]
        rows += [
            (r["run_id"], "*" if accepted_run(opened, r["decision"], r["backend"]) == r["run_id"]
             else "", r["decision"], r["mode"], r["backend"], r["status"], r["updated_at"])
            for r in records
        ]
        rows = [tuple(escape(str(value)) for value in row) for row in rows]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            typer.echo("  ".join(f"{value:<{width}}" for value, width in
                                 zip(row, widths, strict=True)).rstrip())

    @runs.command("show")
    def runs_show(run_id: str = typer.Argument(..., help="The run id (see `decflow runs`)."),
                  store: str | None = common.STORE_OPTION) -> None:
        """Print a run's record (stages, hashes, timings, status) as JSON."""
        from decflow.store.runs import read_run_record
        from decflow.store.store import open_store

        typer.echo(json.dumps(read_run_record(open_store(store), run_id), indent=2))

    @runs.command("accept")
    def runs_accept(run_id: str = typer.Argument(..., help="The run id (see `decflow runs`)."),
                    store: str | None = common.STORE_OPTION) -> None:
        """Mark a run as the accepted baseline for its decision and backend."""
        from decflow.store.runs import accept_run
        from decflow.store.store import open_store

        entry = accept_run(open_store(store), run_id)
        typer.echo(f"accepted {run_id} as the baseline for {entry['decision']} "
                   f"(backend {entry['backend']})")
