"""Byte-level guards for JSON record files, run before any parser sees the bytes.

Arrow's JSON reader takes invalid UTF-8 inside strings as it is (polars later trips over
it) and overflows its stack on very deep nesting, so a JSONL chunk is vetted first: no
byte-order mark, valid UTF-8, no NUL byte; chunks whose brackets may nest deeper than
`ARROW_MAX_DEPTH`, and chunks whose first value is not an object (Arrow crashes on a first
row `null`), go to the strict per-record parser, which reports records nested deeper than
Python's parser can take. Every problem is an exit-2 `DatasetError` naming the file,
the line and, where one can be found, the top-level field.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from decflow.data.records.blocks import Block
from decflow.errors import DatasetError

BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
TO_UTF8 = "save it as UTF-8"
# Arrow's reader was measured to survive 10,000 levels and to crash at 100,000.
ARROW_MAX_DEPTH = 512
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def check_chunk(block: Block, path: str, first_line: int) -> None:
    """Raise for a byte-order mark at the start of the file (UTF-8 or UTF-16), invalid
    UTF-8 or a NUL byte."""
    if first_line == 1 and block.startswith(BOM):
        raise DatasetError(
            f"{path}: line 1: the file starts with a UTF-8 byte-order mark; "
            "save it as UTF-8 without a BOM"
        )
    if first_line == 1 and block.startswith(UTF16_BOMS):
        raise DatasetError(f"{path}: the file is UTF-16 (it starts with a UTF-16 byte-order "
                           f"mark); {TO_UTF8}")
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as exc:
            _raise_at(block, exc.start, path, first_line,
                      f"is not valid UTF-8 (is the file Latin-1? {TO_UTF8})")
    nul = block.find(b"\x00")
    if nul >= 0:
        _raise_at(block, nul, path, first_line, "holds a NUL byte, which JSON text cannot "
                  f"(is the file UTF-16? {TO_UTF8})")


def may_nest_deeper(
    block: Block, limit: int = ARROW_MAX_DEPTH, *, longest_line: int | None = None
) -> bool:
    """Whether brackets in `block` may nest deeper than `limit` (an upper bound: brackets
    inside strings count too, and so do unbalanced lines before). No line longer than
    `limit` bytes (`longest_line`): no, without a look, since Arrow parses every line
    apart (an unbalanced line is an error of its own row, not deeper nesting) and a line
    cannot nest deeper than it is long."""
    if longest_line is not None and longest_line <= limit:
        return False
    brackets = block.translate(None, _NOT_BRACKETS)
    if len(brackets) <= limit:
        return False
    depth = np.cumsum(_STEP[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int64)
    return bool(depth.max() > limit)


# JSON whitespace before a chunk's first value (anything else sends it to the strict parser).
_OPENS_WITH_OBJECT = re.compile(rb"[ \t\r\n]*\{")


def opens_with_object(block: Block) -> bool:
    """Whether the first value in `block` is an object. Arrow's reader crashes the process
    (a segmentation fault, pyarrow 26) when the first row of its input is `null`, so a chunk
    that does not open with `{` goes to the strict parser, which words the problem."""
    return _OPENS_WITH_OBJECT.match(block) is not None


def _raise_at(block: Block, offset: int, path: str, first_line: int, problem: str) -> None:
    start = block.rfind(b"\n", 0, offset) + 1
    end = block.find(b"\n", offset)
    line = block[start : end if end >= 0 else len(block)]
    number = first_line + block.count(b"\n", 0, offset)
    column = offset - start + 1
    field = field_holding(line, offset - start)
    where = f"{field}: " if field else ""
    raise DatasetError(f"{path}: line {number}: {where}byte {column} {problem}")


def field_holding(line: Block, offset: int) -> str | None:
    """The top-level key whose text holds byte `offset` of a JSON object line (None when the
    line does not scan as an object that far)."""
    text = line[:offset].decode("utf-8", errors="replace")
    depth, key, in_string, escaped, start = 0, None, False, False, 0
    last_string = None
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                last_string = text[start : i + 1]
            continue
        if char == '"':
            in_string, start = True, i
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == ":" and depth == 1 and last_string is not None:
            key = _decoded_key(last_string)
        elif char == "," and depth == 1:
            key = None
    if in_string and depth == 1 and key is None:
        return _decoded_key(text[start:] + '"')
    return key


def _decoded_key(literal: str) -> str | None:
    try:
        value: Any = json.loads(literal)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def nesting_problem(line: str | bytes | bytearray) -> str:
    """The message for a record nested too deep for the parser, naming its field."""
    data = line.encode() if isinstance(line, str) else bytes(line)
    field = field_holding(data, _deep_offset(data))
    where = f"{field}: " if field else ""
    return f"{where}nested too deeply to parse (keep records under {ARROW_MAX_DEPTH} levels)"


def _deep_offset(data: bytes) -> int:
    """Offset of the first bracket past `ARROW_MAX_DEPTH` levels (strings included)."""
    steps = _STEP[np.frombuffer(data, dtype=np.uint8)]
    depth = np.cumsum(steps, dtype=np.int64)
    deep = np.flatnonzero(depth > ARROW_MAX_DEPTH)
    return int(deep[0]) if deep.size else len(data)
