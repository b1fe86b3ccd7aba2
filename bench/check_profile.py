"""Where a production check's CPU time goes: the stages of `decflow check` on one Parquet
file, in this process, units one after another, with the CPU seconds (user + sys of all
threads: polars' pool included) spent in each step of reading a unit, its merge and the
summary.

Steps are timed by wrapping the functions that do them, so a step's time includes the
steps inside it (indented). The machine's other load does not count (CPU, not wall time),
but a loaded machine still slows every step a little (shared caches).

usage: python bench/check_profile.py RECORDS.parquet [CONTRACT]
"""

from __future__ import annotations

import importlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_bench import CONTRACT

# (label, module, attribute path, depth): what is timed, and how it is shown.
STEPS = [
    ("read one unit (all below)", "decflow.pipeline.production.statistics", "aggregate_unit", 0),
    ("Parquet row groups → validated batches", "decflow.data.records.parquet",
     "parquet_batches", 1),
    ("validation: types, metadata, checks", "decflow.data.records.parquet", "_parquet_table", 2),
    ("metadata_json → segments", "decflow.data.records.parquet", "_parse_json_column", 3),
    ("record checks (polars)", "decflow.data.records.parquet", "vectorized_table", 3),
    ("positions, id hashes, duplicates", "decflow.data.records.reader", "RecordReader._accept", 1),
    ("statistics of a batch", "decflow.pipeline.production.statistics", "BatchStats.__call__", 1),
    ("per-record columns", "decflow.metrics.production", "record_columns", 2),
    ("Brier terms (exact row sums)", "decflow.metrics.production", "row_sums", 3),
    ("group numbers", "decflow.metrics.production", "group_ids", 2),
    ("grouped statistics", "decflow.metrics.production", "grouped_stats", 2),
    ("exact sums", "decflow.metrics.production", "group_sums", 3),
    ("percentile distributions", "decflow.metrics.production", "_distributions", 3),
    ("SmoothECE grids", "decflow.metrics.production", "grouped_grids", 3),
    ("merging statistics", "decflow.pipeline.production.statistics", "merge_groups", 1),
    ("sorting the unit's id hashes", "decflow.data.records.reader", "RecordReader.id_hashes", 1),
    ("store: a unit's statistics + id hashes", "decflow.pipeline.production.statistics",
     "write_unit", 0),
    ("merge of the units (ids across units)", "decflow.pipeline.production.stages",
     "AGGREGATES.compute", 0),
    ("summary: metrics, gates, report, views", "decflow.pipeline.production.summary",
     "SUMMARY.compute", 0),
]

spent: dict[str, float] = defaultdict(float)
calls: dict[str, int] = defaultdict(int)


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            result = fn(*args, **kwargs)
            if hasattr(result, "__next__"):  # a generator: time each step it takes
                return _timed_iter(label, result, start)
            return result
        finally:
            spent[label] += time.process_time() - start
            calls[label] += 1

    return wrapper


def _timed_iter(label: str, iterator: Any, start: float) -> Any:
    spent[label] -= time.process_time() - start  # counted again below, step by step
    while True:
        begin = time.process_time()
        try:
            item = next(iterator)
        except StopIteration:
            spent[label] += time.process_time() - begin
            return
        spent[label] += time.process_time() - begin
        yield item


def install() -> None:
    for label, module_name, attribute, _ in STEPS:
        module = importlib.import_module(module_name)
        owner: Any = module
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        if name == "compute":  # a Stage (frozen): its function, not the module's name
            object.__setattr__(owner, "compute", timed(label, owner.compute))
            continue
        original = getattr(owner, name)
        setattr(owner, name, timed(label, original))
        # modules that imported the name directly see the wrapped one too
        for other in list(sys.modules.values()):
            if other is not None and other is not module and getattr(
                    other, name, None) is original and other.__name__.startswith("decflow"):
                setattr(other, name, timed(label, original))


def main() -> None:
    records = sys.argv[1]
    contract = sys.argv[2] if len(sys.argv) > 2 else str(CONTRACT)
    import shutil
    import tempfile

    import decflow.pipeline.production.workers as workers
    from decflow.pipeline.production.run import run_check

    install()
    workers.PROCESS_RECORDS = 1 << 62  # units in this process, so their time is seen here
    workers.in_parallel = _one_by_one  # type: ignore[assignment]
    store = tempfile.mkdtemp(prefix="check-profile-")
    start, wall = time.process_time(), time.perf_counter()
    try:
        run_check(contract, records, store=store)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    total, wall = time.process_time() - start, time.perf_counter() - wall
    print(f"{records}: {total:.2f} CPU s in the check ({wall:.2f} s wall)")
    print("| step | CPU s | share | calls |")
    print("| --- | ---: | ---: | ---: |")
    for label, _, _, depth in STEPS:
        indent = "&nbsp;&nbsp;" * depth
        print(f"| {indent}{label} | {spent[label]:.2f} | {100 * spent[label] / total:.0f} % "
              f"| {calls[label]} |")


def _one_by_one(fn: Callable[..., Any], items: Any, *args: Any, processes: bool) -> Any:
    for item in items:
        yield fn(item, *args)


if __name__ == "__main__":
    main()
