"""Progress for long stages: a live bar with rate and ETA on a terminal, log lines otherwise
(`40/132 calls (30%) · 12.3 calls/s · ETA 8 s`, the line a Prefect run's progress shows)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decflow.pipeline.stage import Progress, ProgressFactory

LOG_EVERY_S = 5.0


def _plain(name: str, total: int | None) -> Progress:
    # The first line comes after LOG_EVERY_S (or at the end): a quick stage logs nothing
    # until it ends, and an error is not preceded by "records: 0 (0/s)".
    started = time.monotonic()
    state = {"last": started, "started": started}

    def update(done: int, total_now: int | None) -> None:
        now = time.monotonic()
        finished = total_now is not None and done >= total_now
        if not finished and now - state["last"] < LOG_EVERY_S:
            return  # called per result: nothing else before this
        from decflow.views.progress_text import progress_line

        state["last"] = now
        print(progress_line(done, total_now, now - state["started"], name), file=sys.stderr,
              flush=True)

    return update


@contextmanager
def progress_factory(enabled: bool = True) -> Iterator[ProgressFactory | None]:
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
        ProgressColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bar
    from rich.text import Text

    from decflow.gates.headline import number

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f"{number(task.speed)} {task.description}/s" if task.speed else "")

    with Bar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:

        def factory(name: str, total: int | None) -> Progress:
            task = bar.add_task(name, total=total)

            def update(done: int, total_now: int | None) -> None:
                bar.update(task, completed=done, total=total_now)

            return update

        yield factory
