"""Reading JSONL files block by block: whole lines into a reused buffer, and what one
numpy pass finds in a block (its lines, the longest, those opening with `{`).

Light on purpose (numpy is imported where it is used): a check scans its input with these
while it still imports polars and the contract models.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from typing import TypeVar

from decflow.data.bounds import MAX_RECORD_LINE_BYTES

_SPARE = threading.local()
# The bytes a reader works on: a block read in place (bytearray) or a whole file (bytes).
Block = TypeVar("Block", bytes, bytearray)


class LongLine(Exception):
    """A line longer than the reader's bound; `before` lines of the block precede it."""

    def __init__(self, before: int) -> None:
        super().__init__(f"a line after {before} others is too long")
        self.before = before


class BlockReader:
    """Blocks of an open file read in place into one bytearray, reused from block to block
    and, through a spare kept per thread, by the next reader on the thread (a fresh 16 MB
    buffer costs its page faults twice a file). A block is valid until the next `read`;
    a reader nested in another's block takes a buffer of its own."""

    def __init__(self, handle: io.BufferedIOBase) -> None:
        self.handle = handle
        self._buffer: bytearray | None = getattr(_SPARE, "buffer", None)
        _SPARE.buffer = None

    def __enter__(self) -> BlockReader:
        return self

    def __exit__(self, *exc: object) -> None:
        _SPARE.buffer = self._buffer

    def read(self, size: int, *, whole_lines: bool) -> bytearray:
        """Up to `size` bytes, then (`whole_lines`) the rest of the last line: JSONL blocks
        end at the end of a line or of the file. A line longer than
        `MAX_RECORD_LINE_BYTES` is `LongLine`, found before it is held whole."""
        block = self._sized(size)
        del block[self.handle.readinto(block) :]
        self._buffer = block
        if whole_lines and block and not block.endswith(b"\n"):
            started = len(block) - block.rfind(b"\n") - 1
            rest = self.handle.readline(MAX_RECORD_LINE_BYTES - started + 1)
            if started + len(rest) > MAX_RECORD_LINE_BYTES:
                raise LongLine(block.count(b"\n"))
            block += rest  # grows in place: no copy of the block
        return block

    def _sized(self, size: int) -> bytearray:
        buffer = self._buffer
        if buffer is not None and len(buffer) >= size:
            try:
                del buffer[size:]
                return buffer
            except BufferError:  # something still holds a view of the last block
                pass
        return bytearray(size)


_SCRATCH = threading.local()
_SLICE = 4 << 20


@dataclass(frozen=True)
class LineStats:
    """What one numpy pass over a JSONL block finds: its lines (a last line without a
    newline counts), the longest line's length in bytes, and how many lines open with `{`
    in their first byte (all of them: no blank or indented line, so every line is a
    record and Arrow's row i is line i)."""

    lines: int
    longest: int
    opening: int

    @property
    def plain(self) -> bool:
        return self.opening == self.lines


def line_stats(block: Block) -> LineStats:
    """`LineStats` of a block. numpy finds newlines four times faster than `bytes.count`
    and without the GIL, in slices of 4 MB into this thread's scratch array (fresh scratch
    costs page faults, small slices GIL round trips)."""
    import numpy as np  # here: this module stays light for the scan that overlaps imports

    data = np.frombuffer(block, dtype=np.uint8)
    scratch = getattr(_SCRATCH, "array", None)
    if scratch is None:
        scratch = _SCRATCH.array = np.empty(_SLICE, dtype=np.bool_)
    newlines, last, longest = 0, -1, 0
    opening = int(data.size > 0 and data[0] == ord("{"))
    for start in range(0, data.size, _SLICE):
        piece = data[start : start + _SLICE]
        found = np.flatnonzero(np.equal(piece, ord("\n"), out=scratch[: piece.size]))
        if found.size:
            gaps = int(np.diff(found).max()) - 1 if found.size > 1 else 0
            longest = max(longest, int(found[0]) + start - last - 1, gaps)
            last = int(found[-1]) + start
            following = found + start + 1
            following = following[following < data.size]
            opening += int(np.count_nonzero(data[following] == ord("{")))
        newlines += found.size
    longest = max(longest, data.size - last - 1)
    lines = newlines + (0 if block.endswith(b"\n") or not block else 1)
    return LineStats(lines, longest, opening)
