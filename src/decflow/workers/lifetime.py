"""Child processes end with the process that started them.

A worker ends when its parent's pipe closes, but only if its reader thread gets the GIL:
a plugin stuck in C code that holds it (a catastrophic regular expression) kept a worker
of a SIGKILLed `decflow test` alive for 21 minutes. On Linux the child asks the kernel to
SIGKILL it when its parent dies (`prctl(PR_SET_PDEATHSIG)`, through ctypes), then checks
that the parent is still the one that started it (it may have died before the request).
The kernel sends that signal when the parent *thread* that started the child ends, so
workers are started from one thread that lasts as long as the process (`start_lasting`),
never from a Prefect task's or a pool's thread that may end before the worker should.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from decflow import interrupts

PARENT_ENV = "DECFLOW_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def child_environment() -> dict[str, str]:
    """This process's environment, naming it as the parent of the child started with it."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """In a child started with `child_environment`: be killed when the parent dies, and
    end now if it already has. Without prctl (not Linux) the pipe closing ends it."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not parent.isdigit():
        return
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no C library to ask: the pipe still ends it
            pass
    if os.getppid() != int(parent):
        os._exit(0)


def start_lasting(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(*args, **kwargs)` from a thread that lives as long as this
    process (see the module docstring)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decflow-spawner")
        spawner = _spawner
    return interrupts.result(spawner.submit(subprocess.Popen, *args, **kwargs))
