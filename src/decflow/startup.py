"""How the `decflow` command starts: no cyclic garbage collection until its work begins.

Importing what a command needs (typer, pydantic and the contract models, polars, numpy, the
stages) allocates ~130,000 objects that live until the process ends. At Python's default
thresholds the collector walks them ~185 times on the way (young generations, then the
whole heap), and finds next to no garbage: 60-80 ms of CPU of a command's start. A single
pass costs as much (one young-generation collection of 100,000 objects measured the
same), so the command line raises the first threshold out of reach while it starts
(`begin`); the first stage ends the start-up (`end`): the thresholds go back to what they
were, and each stage keeps what was there before it out of the collector's sight
(`pipeline/stage.py`, `gc.freeze`).

Only the command line calls `begin`: importing decflow as a library leaves the collector
alone. A command that runs no stage keeps the raised threshold (a collection every
million allocations) unless it ends the start-up itself before long work (`decflow
serve`, `decflow probe`).
"""

from __future__ import annotations

import gc

# A young-generation collection every million allocations while the command starts: none
# in a start-up, and still a bound on the garbage a command running no stage can keep.
STARTING_THRESHOLD = 1_000_000

# The thresholds to restore, while the command starts (a list: `pop` is atomic, and stages
# run in threads under Prefect).
_restore: list[tuple[int, int, int]] = []


def begin() -> None:
    """Called first thing by the command line."""
    if not _restore:
        defaults = gc.get_threshold()
        _restore.append(defaults)
        gc.set_threshold(STARTING_THRESHOLD, *defaults[1:])


def end() -> None:
    """The start-up is over; the first call ends it, later calls do nothing."""
    try:
        defaults = _restore.pop()
    except IndexError:
        return
    gc.set_threshold(*defaults)
