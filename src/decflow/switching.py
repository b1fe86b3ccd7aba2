"""The interpreter's switch interval while a run's threads share it with an event loop.

A thread waiting for the interpreter asks the one holding it to let go after the switch
interval (Python's default: 5 ms). While an event loop's thread shares the interpreter with
a thread that works without waiting (imports, the later stages' work made ahead), every
answer the loop wakes for, and every socket call it lets go of the interpreter for, can
wait that long; a shorter interval bounds the wait.

Several threads ask for it, and their blocks overlap in any order (a run's first wave ends
after the work ahead began): the shortest interval asked by the blocks open holds, and the
last to end puts back the interval the first found. (Each thread setting and restoring the
interval itself put Python's 5 ms back while the other still ran.)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Asked:
    """The intervals asked by the open blocks, and the interval the first one found."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.intervals: list[float] = []
        self.found = sys.getswitchinterval()


_asked = _Asked()


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """Inside, a thread waiting for the interpreter asks for it after at most `seconds`."""
    with _asked.lock:
        if not _asked.intervals:
            _asked.found = sys.getswitchinterval()
        _asked.intervals.append(seconds)
        sys.setswitchinterval(min(_asked.intervals))
    try:
        yield
    finally:
        with _asked.lock:
            _asked.intervals.remove(seconds)
            sys.setswitchinterval(min(_asked.intervals, default=_asked.found))
