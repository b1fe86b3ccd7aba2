"""`decflow replay REPORT [--id ID]`: re-send stored property failures; exit 1 if any
reproduces. Works from any directory: the contract copy kept with the run is used."""

from __future__ import annotations

import typer

from decflow.commands import common
from decflow.commands.common import OutputOptions, with_output


def register(app: typer.Typer) -> None:
    @app.command("replay")
    @with_output(views=False)
    def replay_command(
        target: str = typer.Argument(..., help="A fuzz / test --all report file or run id."),
        ids: list[str] = typer.Option([], "--id", help="<property>/<case id>/<sample>"),
        contract: str | None = typer.Option(
            None, "-c", "--contract", help="Judge with this contract (default: the run's copy)."
        ),
        backend: str | None = typer.Option(
            None, "-b", "--backend", help="Send to this backend (default: the run's)."
        ),
        max_concurrency: int | None = common.MAX_CONCURRENCY_OPTION,
        store: str | None = common.STORE_OPTION,
        *,
        out: OutputOptions,
    ) -> None:
        """Re-send stored property failures and their reduced examples."""
        from decflow.pipeline.stored.replay import replay_target
        from decflow.store.store import open_store
        from decflow.views.replay_text import render_replay

        replay = replay_target(target, open_store(store), ids=ids, contract=contract,
                               backend=backend, max_concurrency=max_concurrency)
        raise typer.Exit(out.publish(replay, render_replay, what="replay report"))
