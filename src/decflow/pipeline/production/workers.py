"""Reading a check's units in this process, side by side: worker processes or threads,
and the `UnitRunner` of the direct check (`read_units`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeVar

from decflow import interrupts
from decflow.data.records.reader import RecordSpec
from decflow.data.records.units import Unit, suffix
from decflow.pipeline.production.stages import publish_unit
from decflow.pipeline.production.statistics import BatchStats, aggregate_unit, combine_pieces
from decflow.pipeline.stage import Missing, Stage, StageContext, UnitOutcome, UnitRunner
from decflow.workers.command import spawn_isolated

# From this many records on, Parquet and JSON-list units are read in worker processes: their
# batches are many short numpy and polars calls, so threads share one core's worth of the
# GIL. Below it, starting the processes (imports, ≈0.5 CPU s each) costs more than it
# saves. JSONL units always use threads: Arrow's parser, most of their work, runs without
# the GIL (1M records: 5.1 CPU s in threads, 5.7 in processes, the same wall time).
PROCESS_RECORDS = 1_000_000


def in_processes(units: Sequence[Unit]) -> bool:
    """Whether reading these units is worth worker processes (see `PROCESS_RECORDS`)."""
    jsonl = all(suffix(part.path) == ".jsonl" for unit in units for part in unit.parts)
    return not jsonl and sum(u.n_records for u in units) >= PROCESS_RECORDS


T = TypeVar("T")
R = TypeVar("R")


def spawn_is_safe() -> bool:
    """Whether worker processes may be spawned: each imports the parent's main module
    again, which is only harmless when there is none (`python -c`, a console) or it is one
    of decflow's entry points (they run only under `__name__ == "__main__"`). A user's
    script calling the SDK may do its work unguarded, so it gets threads."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return bool(spec.name == "decflow.__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.basename(path) == "decflow"


def in_parallel(fn: Callable[..., R], items: Sequence[T], *args: Any,
                processes: bool) -> Iterator[R]:
    """`fn(item, *args)` for every item on all cores, in item order: worker processes
    (spawned: polars' threads do not survive a fork) or threads. `fn` and its arguments
    must pickle for processes.

    When the caller stops early (an error, an interruption, the generator closed), the
    items not started are cancelled and worker processes are ended: leaving the pool
    normally would first finish every item (a Ctrl-C took 27 s to end a 4M-record check)."""
    workers = max(1, min(os.cpu_count() or 1, len(items)))
    pool: Executor
    if processes and workers > 1 and spawn_is_safe():
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=workers,
                                   mp_context=multiprocessing.get_context("spawn"))
    else:
        pool = ThreadPoolExecutor(max_workers=workers)
    try:
        if isinstance(pool, ThreadPoolExecutor):
            futures = [pool.submit(fn, item, *args) for item in items]
        else:
            with spawn_isolated():  # submit starts the workers: -P -s, as every child
                futures = [pool.submit(fn, item, *args) for item in items]
        for future in futures:
            yield interrupts.result(future)
    except BaseException:
        _abandon(pool)
        raise
    pool.shutdown()


def _abandon(pool: Executor) -> None:
    """Stop `pool` without waiting: the items not started are cancelled, worker processes
    are ended, threads finish their item on their own (the command does not wait for them,
    `decflow.cli`)."""
    # the executor's own table of its processes (Python 3.14: terminate_workers)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


# Up to this many records, a check in one process keeps the units' id hashes it computed
# (8 bytes a record) for the merge instead of reading them back from the store.
HELD_ID_RECORDS = 20_000_000


def units_reader(batch_stats: Callable[[StageContext[Any]], BatchStats],
                 unit_of: Callable[[Any], Unit] = lambda unit: unit) -> UnitRunner:
    """A `UnitRunner` in this process that reduces records with `batch_stats(context)` (a
    check's statistics, a monitor's per window); `unit_of` finds the `Unit` of a stage's
    unit (a monitor's carry their window). The units not found in the store are read on
    all cores, JSONL units block by block (`Unit.pieces`), each published as soon as its
    pieces are read; what was read is held for the merge (`UnitOutcome.held`)."""

    def read(_stage: Stage[Any], context: StageContext[Any],
             missing: list[Missing]) -> list[UnitOutcome]:
        stats = batch_stats(context)
        units: list[Unit] = [unit_of(unit) for _, unit, _ in missing]
        keep_ids = sum(u.n_records for u in context.spec.plan.units) <= HELD_ID_RECORDS
        pieces = [unit.pieces() for unit in units]
        results = in_parallel(aggregate_unit, [p for own in pieces for p in own], stats.spec,
                              stats, processes=in_processes(units))
        progress = context.progress("records", None) if context.progress else None
        outcomes: list[UnitOutcome] = []
        done = 0
        for (_, _, key), unit, own in zip(missing, units, pieces, strict=True):
            result = combine_pieces(unit, [next(results) for _ in own])
            outcomes.append(publish_unit(context.store, key, result, keep_ids=keep_ids))
            done += result.n_records
            if progress:
                progress(done, None)
        return outcomes

    return read


def check_stats(context: StageContext[Any]) -> BatchStats:
    """A check's statistics of a batch of records."""
    contract = context.loaded.contract
    return BatchStats.of(RecordSpec.from_contract(contract), contract)


# The `UnitRunner` of a production check in this process.
read_units = units_reader(check_stats)
