"""Progress for long stages: a live bar with rate and ETA on a terminal, log lines otherwise
(`40/132 calls (30%) · 12.3 calls/s · ETA 8 s`, the line a Prefect run's progress shows)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Update = Callable[[int, int | None], None]
Factory = Callable[[str, int | None], Update]  # total None: unknown (e.g. records in files)

LOG_EVERY_S = 5.0


def _plain(name: str, total: int | None) -> Update:
    # The first line comes after LOG_EVERY_S (or at the end): a quick stage logs nothing
    # until it ends, and an error is not preceded by "records: 0 (0/s)".
    started = time.monotonic()
    state = {"last": started, "started": started}

    def update(done: int, total_now: int | None) -> None:
        from decflow.views.progress_text import progress_line

        now = time.monotonic()
        finished = total_now is not None and done >= total_now
        if not finished and now - state["last"] < LOG_EVERY_S:
            return
        state["last"] = now
        print(progress_line(done, total_now, now - state["started"], name), file=sys.stderr,
              flush=True)

    return update


@contextmanager
def progress_factory(enabled: bool = True) -> Iterator[Factory | None]:
    """Yield a factory `(stage name, total) -> update(done, total)`, or None when disabled."""
    if not enabled:
        yield None
        return
    if not sys.stderr.isatty():
        yield _plain
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    from decflow.gates.headline import number

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f"{number(task.speed)} {task.description}/s" if task.speed else "")

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:

        def factory(name: str, total: int | None) -> Update:
            task = bar.add_task(name, total=total)

            def update(done: int, total_now: int | None) -> None:
                bar.update(task, completed=done, total=total_now)

            return update

        yield factory
