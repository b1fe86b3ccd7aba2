"""Credential values this process holds, and their removal from everything it shows or
stores.

Every value of every credential a contract names (`bearer_token_env`, `headers_from_env`,
`api_key_env`, a plugin setting ending in `_env`) is registered when the contract is
loaded, and again wherever one is read; `redact_text` and `redact` replace each
occurrence with `[REDACTED]`, wherever a backend echoed it (a model name, an error, a
metadata value, a label). The sinks call them: result rows, the report, every view and
file written, stdout and stderr, log records and Prefect artifacts.

This module imports nothing from decflow, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MARK = "[REDACTED]"
# A value shorter than this is not redacted: removing every "acme" or "tok" would mangle
# ordinary text, and no credential worth the name is that short.
MIN_LENGTH = 8
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()
_factory_installed = False


def register(values: Iterable[str]) -> None:
    """Remember credential values to redact (shorter than `MIN_LENGTH`: ignored). The first one
    also makes every log record redacted as it is made, whatever handler ships it
    (stderr, a file, Prefect's API)."""
    global _pattern
    fresh = {value for value in values if len(value) >= MIN_LENGTH and value not in _secrets}
    if not fresh:
        return
    with _lock:
        if not _factory_installed:
            _redact_log_records()
        _secrets.update(fresh)
        # longest first: a secret that contains another is removed whole
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(value) for value in ordered))


def forget() -> None:
    """Forget every registered value (a process about to run another contract's checks,
    as a test session does)."""
    global _pattern
    with _lock:
        _secrets.clear()
        _pattern = None


def _redact_log_records() -> None:
    global _factory_installed
    _factory_installed = True
    make = logging.getLogRecordFactory()

    def redacted(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        if _pattern is not None:
            try:
                message = record.getMessage()
            except Exception:  # a record that cannot format is left to its handler
                return record
            record.msg, record.args = redact_text(message), None
        return record

    logging.setLogRecordFactory(redacted)


def redact_text(text: str) -> str:
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(MARK, text)


def redact(value: Any) -> Any:
    """`value` with every registered credential removed from its strings (keys too),
    recursively through mappings, lists and tuples."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact(key): redact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(item) for item in value)
    return value


class StreamRedactor:
    """Redacts a text that arrives in pieces (a worker's output, cut every 2,000 bytes): a
    credential split between two pieces is removed whole, never shown in halves. A piece
    comes out once no credential can still be completed by what follows: an end of it
    that begins a credential is held back until the next piece, or `end`."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = redact_text(self._held + piece)
        keep = _begins_a_secret(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def end(self) -> str:
        held, self._held = self._held, ""
        return held


def _begins_a_secret(text: str) -> int:
    """The length of the longest end of `text` that is the start (not the whole) of a
    registered credential."""
    longest = 0
    for secret in tuple(_secrets):
        for size in range(min(len(secret) - 1, len(text)), longest, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return longest


class RedactingStream:
    """A text stream that writes through `stream` with credentials redacted."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """While the block runs, everything written to stdout and stderr is redacted."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(saved[0]), RedactingStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
