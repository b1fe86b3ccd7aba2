"""The `results` stage: every request ends as exactly one result row or one typed error row.

Requests are decided in shards. In-process backends decide a shard in one batch call;
remote backends go through the async engine. Finished rows are written as chunk files as
they arrive, so `--resume RUN` re-sends only requests without a recorded result (at most the
`max_concurrency` requests in flight at a kill are sent again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import polars as pl

from decflow.backends.base import Backend, DecisionSpec
from decflow.backends.engine import (
    CHUNK_ROWS,
    JOURNALLED_CHUNK_ROWS,
    RemoteCaller,
    WriteChunk,
    decide_in_process,
)
from decflow.backends.results_schema import RESULTS_SCHEMA
from decflow.pipeline.stage import Progress

log = logging.getLogger(__name__)


def _error_rows(request_ids: pl.Series, kinds: list[str], messages: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"request_id": request_ids, "error_kind": kinds, "error_message": messages},
        schema={"request_id": pl.String, "error_kind": pl.String, "error_message": pl.String},
    ).with_columns(
        [pl.lit(None, dtype=dtype).alias(name) for name, dtype in RESULTS_SCHEMA.items()
         if name not in ("request_id", "error_kind", "error_message")]
    ).select(list(RESULTS_SCHEMA))


ORIGINAL_ERROR = "original_error"  # a transformed request not sent: its original errored


def original_error_rows(transformed: pl.DataFrame, failed: pl.DataFrame) -> pl.DataFrame:
    """Transformed requests of a case whose original errored are not sent."""
    joined = transformed.join(
        failed.select("case_id", pl.col("error_kind").alias("original_kind")), on="case_id",
        maintain_order="left",
    )
    messages = [f"the original case errored ({kind})" for kind in joined["original_kind"]]
    return _error_rows(joined["request_id"], [ORIGINAL_ERROR] * joined.height, messages)


def generation_error_rows(transformed: pl.DataFrame) -> pl.DataFrame:
    """Transformed cases whose generation failed (e.g. paraphrase provider) are not sent."""
    failed = transformed.filter(pl.col("pre_error_kind").is_not_null())
    return _error_rows(
        failed["request_id"],
        failed["pre_error_kind"].to_list(),
        failed["pre_error_message"].to_list(),
    )


def decide_batches(
    backend: Backend,
    requests: pl.DataFrame,
    *,
    labels: Sequence[str],
    tolerance: float,
    shard_size: int,
    sink: Callable[[pl.DataFrame], None],
    progress: Progress | None = None,
) -> None:
    """`decide_requests` for an in-process batch backend, in this thread: no event loop
    (about 3 ms of CPU to set up each) for work that never waits."""
    total = requests.height
    for offset in range(0, total, shard_size):
        shard = requests.slice(offset, shard_size)
        sink(decide_in_process(backend, shard, labels, tolerance))
        if progress:
            progress(offset + shard.height, total)


async def decide_requests(
    backend: Backend,
    requests: pl.DataFrame,
    *,
    decision: DecisionSpec,
    tolerance: float,
    max_concurrency: int,
    shard_size: int,
    sink: Callable[[pl.DataFrame], None],
    progress: Progress | None = None,
    journal: Callable[[tuple[Any, ...]], None] | None = None,
    slots: asyncio.Semaphore | None = None,
    on_sent: Callable[[], None] | None = None,
    write_chunk: WriteChunk | None = None,
    answered: dict[str, Future[tuple[Any, ...] | None]] | None = None,
) -> None:
    """Decide `requests` (already filtered to what still needs a result) shard by shard.

    Runs inside the caller's event loop so remote clients live for the whole stage. With a
    `journal`, remote results come in chunks of `JOURNALLED_CHUNK_ROWS`. Remote results go
    to `write_chunk` (in a writer thread) where given, else to `sink`, as decided batches
    do. `slots` and `on_sent` as `RemoteCaller.run` (remote backends); `on_sent` is called
    once every request is sent or decided. `answered`: as `RemoteCaller.run`'s.
    """
    total = requests.height
    done = 0
    caller = RemoteCaller(backend, decision, tolerance, max_concurrency)
    counter = _CallCounter(total, journal, progress)
    for offset in range(0, total, shard_size):
        shard = requests.slice(offset, shard_size)
        if backend.supports_batch:
            sink(decide_in_process(backend, shard, decision.labels, tolerance))
            await asyncio.sleep(0)  # where a signal's cancellation reaches this loop
        else:
            counter.done = done
            last = offset + shard_size >= total
            await caller.run(shard, decision.labels, sink, on_result=counter,
                             chunk_size=CHUNK_ROWS if journal is None else JOURNALLED_CHUNK_ROWS,
                             slots=slots, on_sent=on_sent if last else None,
                             write_chunk=write_chunk, answered=answered)
        done += shard.height
        if progress:
            progress(done, total)
    if on_sent is not None and (backend.supports_batch or not total):
        on_sent()


class _CallCounter:
    """Each finished remote call: recorded in the journal, then counted in the progress, so
    a bar or progress artifact moves call by call, not once per shard of thousands (the
    progress callbacks throttle what they print or send)."""

    def __init__(self, total: int, journal: Callable[[tuple[Any, ...]], None] | None,
                 progress: Progress | None) -> None:
        self.total, self.journal, self.progress = total, journal, progress
        self.done = 0

    def __call__(self, result: tuple[Any, ...]) -> None:
        if self.journal is not None:
            self.journal(result)
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)
