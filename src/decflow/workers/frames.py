"""Messages between decflow and a worker process: a 4-byte big-endian length, then UTF-8
JSON. JSON and not pickle, because reading a pickle runs code: a hostile worker could end
the parent that way. A frame longer than `MAX_FRAME` or not a JSON object is a broken
worker, like one that died."""

from __future__ import annotations

import json
import os
import struct
from typing import Any

MAX_FRAME = 256 << 20
_HEADER = struct.Struct(">I")


class BrokenFrame(Exception):
    """The other side sent something that is not a frame of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    # default=str: a value JSON cannot hold (a numpy float32, a Decimal) travels as text
    # and is refused where it is validated, as it would have been in this process
    body = json.dumps(message, default=str, ensure_ascii=False).encode("utf-8", "replace")
    if len(body) > MAX_FRAME:
        raise BrokenFrame(f"a message of {len(body):,} bytes is larger than {MAX_FRAME:,}")
    return _HEADER.pack(len(body)) + body


def write_encoded(fd: int, frame: bytes) -> None:
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict[str, Any] | None:
    """The next message, or None when the other side closed the pipe."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise BrokenFrame(f"a frame announces {size:,} bytes (at most {MAX_FRAME:,})")
    body = _read_exactly(fd, size)
    if body is None:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BrokenFrame(f"a frame is not JSON ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise BrokenFrame("a frame is not a JSON object")
    return message
