"""What a command writes to stdout and stderr when the other end cannot take it.

A reader that went away (`decflow test … 2>&1 | head -1`: the pipe is closed, every write
is EPIPE) is no failure of the command: what is still written there is thrown away and the
command runs to its own end and exit code (a run it stores is recorded as it ended, never
`failed` for a broken pipe). The descriptor is pointed at /dev/null, so no later write or
the flush at exit, by whoever holds the stream, fails again. Any other write error (a full
disk or a file-size limit where stdout was redirected) is one `DecflowError` naming the
file, as a write to the store or an output file is; on stderr, where that error would be
written, it is dropped like a closed pipe.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any

from decflow.errors import DecflowError


def _where(stream: Any, name: str) -> str:
    """The file a stream writes to (Linux names it), else the stream's name."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        target = os.readlink(f"/proc/self/fd/{stream.fileno()}")
        if target.startswith("/"):
            return target
    return name


class GuardedStream:
    def __init__(self, stream: Any, name: str, *, reports: bool) -> None:
        """`reports`: a write error other than EPIPE is a `DecflowError` (stdout)."""
        self._stream = stream
        self._name = name
        self._reports = reports

    def _failed(self, exc: OSError) -> None:
        if exc.errno != errno.EPIPE and self._reports:
            where = _where(self._stream, self._name)
            raise DecflowError(f"{where}: cannot write the command's output "
                               f"({exc.strerror or exc}); free space or raise the limit, "
                               "or write it elsewhere") from None
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # not a file descriptor: nothing will be written there again anyway
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            self._stream.write(text)
        except OSError as exc:
            self._failed(exc)
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """While the block runs, stdout and stderr are `GuardedStream`s."""
    saved = sys.stdout, sys.stderr
    sys.stdout = GuardedStream(saved[0], "standard output", reports=True)
    sys.stderr = GuardedStream(saved[1], "standard error", reports=False)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
