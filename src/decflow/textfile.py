"""Decoding an untrusted text file (contract, dataset, report) as UTF-8, or saying why not.

A UTF-8 byte-order mark is dropped (editors on Windows write one). UTF-16 and UTF-32 files
(recognised by their byte-order mark) are refused by name, since their bytes otherwise read
as a stray `\\xff` and NUL bytes; a NUL byte anywhere is refused (a text file has none: the
file is binary or in a 16-bit encoding without a mark); a byte that is not UTF-8 (Latin-1,
Windows-1252) is refused with its line and column. Each refusal says what to do.

This module imports nothing from decflow.
"""

from __future__ import annotations

import codecs

_UTF8_BOM = codecs.BOM_UTF8
# UTF-32 first: its little-endian mark starts with UTF-16's.
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
SAVE_AS_UTF8 = "save it as UTF-8"


class TextProblem(ValueError):
    """Why the bytes are not a UTF-8 text, with the 1-based line and column when known."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            return self.reason
        return f"line {self.line}, column {self.column}: {self.reason}"


def _place(raw: bytes, offset: int) -> tuple[int, int]:
    line_start = raw.rfind(b"\n", 0, offset) + 1
    column = len(raw[line_start:offset].decode("utf-8", errors="replace")) + 1
    return raw.count(b"\n", 0, offset) + 1, column


def decode_utf8(raw: bytes) -> str:
    """The text of `raw`, without a UTF-8 byte-order mark; TextProblem otherwise."""
    for mark, encoding in _OTHER_BOMS:
        if raw.startswith(mark):
            raise TextProblem(f"the file is {encoding} (it starts with a {encoding} "
                              f"byte-order mark); {SAVE_AS_UTF8}")
    raw = raw.removeprefix(_UTF8_BOM)
    nul = raw.find(b"\x00")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if 0 <= nul < exc.start:
            raise _nul_problem(raw, nul) from None
        line, column = _place(raw, exc.start)
        raise TextProblem(
            f"byte 0x{raw[exc.start]:02x} is not UTF-8 (is the file Latin-1 or "
            f"Windows-1252?); {SAVE_AS_UTF8}",
            line,
            column,
        ) from None
    if nul >= 0:
        raise _nul_problem(raw, nul)
    return text


def _nul_problem(raw: bytes, offset: int) -> TextProblem:
    line, column = _place(raw, offset)
    return TextProblem(
        f"NUL byte: a text file has none (is it binary, or UTF-16 without a byte-order "
        f"mark?); {SAVE_AS_UTF8} text",
        line,
        column,
    )


def utf8_size(text: str, limit: int) -> int:
    """How many bytes `text` takes as UTF-8, or TextProblem: a lone surrogate (JSON can
    spell `"\\ud800"`, Python keeps it, and no file or terminal can hold it), or more than
    `limit` bytes."""
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise TextProblem(f"is not valid Unicode: a lone surrogate "
                              f"\\u{ord(text[exc.start]):04x} at character {exc.start + 1:,}"
                              ) from None
    if size > limit:
        raise TextProblem(f"holds {size:,} bytes; at most {limit:,} are read (SECURITY.md)")
    return size
