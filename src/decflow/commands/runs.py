"""`decflow runs`: list stored runs; `runs show ID`; `runs accept ID` (accepted baseline)."""

from __future__ import annotations

import json
from typing import Any

import typer

from decflow.commands import common
from decflow.commands.common import open_store


def list_runs(store: Any) -> list[dict[str, Any]]:
    records = []
    for run_id in store.list_dir("runs"):
        relative = f"runs/{run_id}/run.json"
        if store.exists(relative):
            records.append(store.read_json(relative))
    return sorted(records, key=lambda r: r["run_id"])


def accepted_path(decision: str, backend: str) -> str:
    return f"accepted/{decision}/{backend}.json"


def accept_run(store: Any, run_id: str) -> dict[str, Any]:
    from decflow.errors import DecflowError
    from decflow.pipeline.contract_run.runner import load_run_record
    from decflow.pipeline.spec import now_iso

    record = load_run_record(store, run_id)
    if record.get("kind") == "probe":
        raise DecflowError(f"run {run_id} is a probe; only contract runs can be a regression "
                           "baseline")
    if record["status"] not in ("pass", "warn", "fail"):
        raise DecflowError(f"run {run_id} did not finish (status {record['status']}); "
                           "finish it with --resume before accepting it")
    entry = {
        "run_id": run_id,
        "decision": record["decision"],
        "backend": record["backend"],
        "contract_hash": record["contract_hash"],
        "dataset_hash": record["dataset_hash"],
        "accepted_at": now_iso(),
    }
    store.write_json(accepted_path(record["decision"], record["backend"]), entry)
    return entry


def accepted_run(store: Any, decision: str, backend: str) -> str | None:
    relative = accepted_path(decision, backend)
    if not store.exists(relative):
        return None
    run_id: str = store.read_json(relative)["run_id"]
    return run_id


def register(app: typer.Typer) -> None:
    runs = typer.Typer(help="Stored runs: list, show, accept as baseline.",
                       invoke_without_command=True, no_args_is_help=False)
    app.add_typer(runs, name="runs")

    @runs.callback()
    def runs_list(ctx: typer.Context, store: str | None = common.STORE_OPTION) -> None:
        """List stored runs (id, decision, mode, backend, status, time)."""
        if ctx.invoked_subcommand is not None:
            return
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
        from decflow.pipeline.contract_run.runner import load_run_record

        typer.echo(json.dumps(load_run_record(open_store(store), run_id), indent=2))

    @runs.command("accept")
    def runs_accept(run_id: str, store: str | None = common.STORE_OPTION) -> None:
        """Mark a run as the accepted baseline for its decision and backend."""
        entry = accept_run(open_store(store), run_id)
        typer.echo(f"accepted {run_id} as the baseline for {entry['decision']} "
                   f"(backend {entry['backend']})")
