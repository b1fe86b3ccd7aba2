"""`decflow replay REPORT [--id ID]`: re-send stored property failures; exit 1 if any
reproduces. Works from any directory: the contract copy kept with the run is used."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import check_format, emit, open_store, write_json


def register(app: typer.Typer) -> None:
    @app.command("replay")
    def replay_command(
        target: str = typer.Argument(..., help="A fuzz / test --all report file or run id."),
        ids: list[str] = typer.Option([], "--id", help="<property>/<case id>/<sample>"),
        contract: str | None = typer.Option(None, "-c", "--contract"),
        backend: str | None = typer.Option(None, "-b", "--backend"),
        output: str | None = common.OUTPUT_OPTION,
        fmt: str = common.FORMAT_OPTION,
        max_concurrency: int | None = common.MAX_CONCURRENCY_OPTION,
        store: str | None = common.STORE_OPTION,
    ) -> None:
        """Re-send stored property failures and their reduced examples."""
        from decflow.commands.report import load_verified
        from decflow.contracts import load_contract
        from decflow.errors import DecflowError
        from decflow.pipeline.stored.replay import render_replay, replay_report, stored_contract

        check_format(fmt)
        report, source, _run_id = load_verified(target, open_store(store))
        path = contract or stored_contract(report) or report["contract"]["path"]
        try:
            loaded = load_contract(path)
        except DecflowError as exc:
            raise DecflowError(f"cannot read contract {path} ({exc}); pass --contract") from None
        replay = replay_report(report, loaded, source=source, backend=backend, ids=ids,
                               max_concurrency=max_concurrency)
        if output:
            write_json(output, replay, "replay report")
        emit(replay, render_replay(replay), fmt)
        raise typer.Exit(replay["exit_code"])
