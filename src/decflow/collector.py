"""The cyclic garbage collector while remote calls are in flight: a young-generation
collection every `CALLS_THRESHOLD` allocations instead of Python's 700.

A remote run allocates a few dozen containers per request, and reference counting frees
nearly all of them. The collector still walks whatever is alive at each pass: the requests
in flight, the rows waiting for their chunk, and the modules the command imports meanwhile
for its later stages (`commands/ahead.py`), which age into the oldest generation and are
then walked whole. In a 20,000-request run at the default thresholds that was 340 young,
30 middle and 2 full collections, 150-250 ms with the event loop stopped (a full one
~25 ms, which every answer arriving meanwhile waits out); at 10,000: ~80 young, 7 middle,
no full one, 60-90 ms (bench/README.md). Garbage in reference cycles waits at most
10,000 allocations longer.

Calls overlap (shards on one loop, stages in threads under Prefect): the first to start
raises the threshold, the last to end puts back what the first saw.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CALLS_THRESHOLD = 10_000



class _Raised:
    """How many call runs are open, and the thresholds the first one found."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.found = gc.get_threshold()


_raised = _Raised()


@contextmanager
def calls_in_flight() -> Iterator[None]:
    """Young collections at most every `CALLS_THRESHOLD` allocations inside; a higher
    threshold already set (the command's start-up, `decflow.startup`) stays."""
    with _raised.lock:
        if _raised.open == 0:
            _raised.found = gc.get_threshold()
            first, *older = _raised.found
            gc.set_threshold(max(first, CALLS_THRESHOLD), *older)
        _raised.open += 1
    try:
        yield
    finally:
        with _raised.lock:
            _raised.open -= 1
            if _raised.open == 0:
                gc.set_threshold(*_raised.found)
