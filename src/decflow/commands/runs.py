"""`decflow runs`: list stored runs with their true state; `runs show ID`; `runs accept ID
[--force]` (accepted baseline); `runs trend DECISION` (the last runs' gated metrics with
intervals); `runs verify [ID]`; `runs gc`; `runs rm RUN`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from decflow.commands import common
from decflow.untrusted import escape

if TYPE_CHECKING:
    from decflow.store.removal import Removal

DRY_RUN_OPTION = typer.Option(False, "--dry-run", help="Say what would go; remove nothing.")


def register(app: typer.Typer) -> None:
    runs = typer.Typer(help="Stored runs: list, show, accept as baseline, verify, gc, rm.",
                       invoke_without_command=True, no_args_is_help=False)
    app.add_typer(runs, name="runs")
    register_upkeep(runs)

    @runs.callback()
    def runs_list(ctx: typer.Context, store: str | None = common.STORE_OPTION) -> None:
        """List stored runs (id, accepted baseline, decision, mode, backend, true status,
        time; a monitor run's window runs indented under it), then what to know about runs
        that did not finish; a run whose record is damaged is listed as such, and the
        command exits 2 naming its file."""
        if ctx.invoked_subcommand is not None:
            return
        from decflow.store.call_cache import cache_usage
        from decflow.store.runs import (
            damaged_files,
            is_accepted,
            list_runs,
            no_longer_match,
            run_state,
        )
        from decflow.store.store import open_store

        opened = open_store(store)
        listing = list_runs(opened)
        if not listing.records and not listing.damaged:
            typer.echo(f"no runs in the store {opened.location}")
            return
        rows: list[tuple[object, ...]] = [
            ("run", "accepted", "decision", "mode", "backend", "status", "updated (UTC)")]
        notes, edited = [], []
        for record in listing.records:
            state = run_state(opened, record)
            # a report or view edited since the run is listed, never trusted
            damaged = damaged_files(opened, record)
            # a monitor's window runs follow their monitor run (their ids extend its id)
            window = record.get("window") if record.get("kind") == "window" else None
            shown_id = record["run_id"] if window is None else f"  {record['run_id']}"
            mode = record.get("mode") if window is None else f"window {window}"
            rows.append((shown_id, "*" if is_accepted(opened, record) else "",
                         record.get("decision"), mode, record.get("backend"),
                         "damaged" if damaged else state.status, record.get("updated_at")))
            if damaged:
                edited.append(f"run {record['run_id']}: {no_longer_match(damaged)} the "
                              "sha256 in its run.json (edited since the run); "
                              f"{'it is' if len(damaged) == 1 else 'they are'} not read")
            elif state.detail:
                notes.append(f"{record['run_id']} {state.status}: {state.detail}")
        rows += [(run_id, "", "", "", "", "damaged", "") for run_id in listing.damaged]
        print_table(rows)
        usage = cache_usage(opened)
        if usage.packs:
            typer.echo(escape(usage.line(opened.location)))
        for note in notes:
            typer.echo(escape(note))
        for problem in [*map(str, listing.damaged.values()), *edited]:
            typer.echo(f"error: {escape(problem)}", err=True)
        if listing.damaged or edited:
            raise typer.Exit(2)

    @runs.command("show")
    def runs_show(run_id: str = typer.Argument(..., help="The run id (see `decflow runs`)."),
                  store: str | None = common.STORE_OPTION) -> None:
        """Print a run's record (stages, hashes, timings, true status) as JSON."""
        from decflow.store.runs import read_run_record, run_state
        from decflow.store.store import open_store

        opened = open_store(store)
        record = read_run_record(opened, run_id)
        state = run_state(opened, record)
        shown = {**record, "status": state.status}
        if state.detail:
            shown["status_detail"] = state.detail
        typer.echo(json.dumps(shown, indent=2))

    @runs.command("accept")
    def runs_accept(
        run_id: str = typer.Argument(..., help="The run id (see `decflow runs`)."),
        force: bool = typer.Option(False, "--force", help="Accept a run that did not PASS."),
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """Mark a finished run (a contract run, or a check run) as the accepted baseline for
        its decision and backend; a run that did not PASS needs --force."""
        from decflow.store.runs import accept_run
        from decflow.store.store import open_store

        entry = accept_run(open_store(store), run_id, force=force)
        replaced = f"; it replaces {entry['replaces']}" if entry["replaces"] else ""
        typer.echo(escape(f"accepted {run_id} ({entry['status'].upper()}) as the baseline for "
                          f"{entry['decision']} (backend {entry['backend']}){replaced}"))

    @runs.command("trend")
    def runs_trend(
        decision: str = typer.Argument(..., help="The decision's name (contract decision.name)."),
        backend: str | None = typer.Option(None, "-b", "--backend",
                                           help="Only runs on this backend (default: any)."),
        last: int = typer.Option(10, "--last", min=1, help="How many of the latest runs."),
        fmt: str = common.FORMAT_OPTION,
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """The last runs of a decision: each gated metric with its interval and status; the
        accepted baseline marked."""
        from decflow.commands.common import check_format
        from decflow.pipeline.trend import decision_trend
        from decflow.store.store import open_store
        from decflow.views.trend_text import render_trend

        check_format(fmt)
        trend = decision_trend(open_store(store), decision, backend=backend, last=last)
        typer.echo(json.dumps(trend, indent=2) if fmt == "json" else render_trend(trend),
                   nl=fmt == "json")


def register_upkeep(runs: typer.Typer) -> None:
    """`runs verify` and `runs gc`."""

    @runs.command("verify")
    def runs_verify(
        run_id: str | None = typer.Argument(None, help="One run (default: every run)."),
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """Re-hash runs' artifacts against their records and manifests; list what is
        damaged (exit 2 if anything is)."""
        from decflow.store.runs import list_runs
        from decflow.store.store import open_store
        from decflow.store.upkeep import verify_run

        opened = open_store(store)
        if run_id:
            ids = [run_id]
        else:  # every run, damaged ones too; not a folder a starting run holds
            listing = list_runs(opened)
            ids = sorted([r["run_id"] for r in listing.records] + list(listing.damaged))
        damaged = 0
        for one in ids:
            checked, damage = verify_run(opened, one)
            if not damage:
                typer.echo(f"{one} ok ({checked} files)")
                continue
            damaged += 1
            typer.echo(f"{one} damaged:")
            for found in damage:
                typer.echo(escape(f"  {found.path} {found.problem}"))
        if damaged:
            typer.echo(f"error: {damaged} of {len(ids)} runs are damaged; their reports and "
                       "stages cannot be trusted: run them again (a finished run with "
                       "`--resume RUN` reuses what is intact), then remove the damaged runs",
                       err=True)
            raise typer.Exit(2)

    @runs.command("gc")
    def runs_gc(
        keep: int | None = typer.Option(None, "--keep", min=0,
                                        help="Keep the N newest runs of each decision."),
        older_than: str | None = typer.Option(
            None, "--older-than", help="Remove only runs older than this (30d, 12h, 90m)."),
        dry_run: bool = DRY_RUN_OPTION,
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """Remove old runs and the stage artifacts only they used; never an accepted run, a
        running one, or a stage another run uses. Every run and folder removed is named."""
        from decflow.store.removal import collect_garbage, parse_age
        from decflow.store.store import open_store
        from decflow.views.text import counted

        result = collect_garbage(open_store(store), keep=keep,
                                 older_than=None if older_than is None else parse_age(
                                     older_than), dry_run=dry_run)
        say_removed(result, dry_run)
        verb = "would remove" if dry_run else "removed"
        typer.echo(f"{verb} {counted(len(result.runs), 'run')} and "
                   f"{counted(len(result.stages), 'stage artifact')}; kept "
                   f"{counted(result.kept, 'run')}")

    @runs.command("rm")
    def runs_rm(
        run_id: str = typer.Argument(..., help="The run id (see `decflow runs`)."),
        force: bool = typer.Option(False, "--force", help="Remove an accepted run (and its "
                                   "accepted entry), or a run another run names."),
        dry_run: bool = DRY_RUN_OPTION,
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """Remove a run that nothing references, and the stage artifacts only it used; an
        accepted run, or one another run continues, needs --force."""
        from decflow.store.removal import remove_run
        from decflow.store.store import open_store
        from decflow.views.text import counted

        result = remove_run(open_store(store), run_id, force=force, dry_run=dry_run)
        say_removed(result, dry_run)
        verb = "would remove" if dry_run else "removed"
        typer.echo(f"{verb} 1 run and {counted(len(result.stages), 'stage artifact')}")


def say_removed(result: Removal, dry_run: bool) -> None:
    """One line per run, accepted entry and stage folder removed, then the notes."""
    verb = "would remove" if dry_run else "removed"
    lines = [*(f"{verb} run {run_id}" for run_id in result.runs),
             *(f"{verb} accepted entry {entry}" for entry in result.entries),
             *(f"{verb} stage artifact {folder}" for folder in result.stages)]
    for line in lines:
        typer.echo(escape(line))
    for note in result.notes:
        typer.echo(escape(f"note: {note}"), err=True)


def print_table(rows: list[tuple[object, ...]]) -> None:
    """Rows as left-aligned columns (untrusted text escaped)."""
    shown = [tuple(escape("" if value is None else str(value)) for value in row)
             for row in rows]
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    for row in shown:
        typer.echo("  ".join(f"{value:<{width}}" for value, width in
                             zip(row, widths, strict=True)).rstrip())
