"""Showing untrusted text (case inputs, model answers, record fields, keys and values of
user files) on a terminal or in a message, without letting it act on the terminal.

A terminal obeys escape sequences wherever they appear: `ESC ] 0 ; title BEL` retitles the
window, OSC 52 writes the clipboard, OSC 8 plants links, CSI moves the cursor; a carriage
return or backspace overwrites what was printed before it, and bidi controls reorder what
is shown so `txt.exe` can read as `exe.txt`. `escape` shows each such character as a
Python-style escape instead:

- C0 controls, DEL and C1 controls: `\\x1b`, `\\x7f`, `\\x9b` (tab, carriage return and
  newline as `\\t`, `\\r`, `\\n`);
- bidi embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E,
  U+200F, U+061C) and the Unicode line and paragraph separators (U+2028, U+2029):
  `\\u202e`;
- lone surrogates (JSON can spell `"\\ud800"`), which a UTF-8 terminal cannot even encode:
  `\\ud800`.

Newlines: `escape(text)` keeps everything on one line (`\\n` is escaped too), which is what
a table cell, a log line or one line of an error message needs. `escape(text,
keep_newlines=True)` keeps `\\n` as a real line break, for blocks that are meant to span
lines (a multi-line error message); every other character above is still escaped, the
carriage return included.

Backslashes are shown as they are, so the escaped form is for reading, not for decoding:
a text that already contains the four characters `\\x1b` looks the same as one holding an
ESC. Everything else (letters of every script, emoji, combining marks) is shown unchanged.

This module imports nothing from decflow so every layer can use it.
"""

from __future__ import annotations

import re
from functools import cache

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_OTHERS = f"\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff"
ELLIPSIS = "…"


# Compiled when first used, not on import: the three classes (surrogates, bidi and C1
# ranges) take ~2.5 ms to compile, and a run sends its first request before it escapes
# anything.
@cache
def _unsafe(keep_newlines: bool) -> re.Pattern[str]:
    kept = "\x00-\x09\x0b-\x1f" if keep_newlines else "\x00-\x1f"
    return re.compile(f"[{kept}{_OTHERS}]")


@cache
def _json_unsafe() -> re.Pattern[str]:
    return re.compile(f"[{_OTHERS}]")


def compile_patterns() -> None:
    """Compile the patterns now (a run does while its backend is called, before it shows
    its report: `decflow.commands.ahead`)."""
    for keep_newlines in (False, True):
        _unsafe(keep_newlines)
    _json_unsafe()


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control, bidi and separator characters shown as escapes (see module)."""
    pattern = _unsafe(keep_newlines)
    if pattern.search(text) is None:
        return text
    return pattern.sub(_shown, text)


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, ending in `…` and the count left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS} ({len(text) - limit:,} more characters)"


def quote(value: object, limit: int = 80) -> str:
    """An untrusted value for an error message: strings `'quoted'`, anything else as
    `str(value)`; escaped, and at most `limit` characters of it shown (a 400-digit
    integer reads as `a 400-digit integer`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            digits = str(value)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return "an integer too long to show"
        if len(digits) > limit:
            return f"a {len(digits.lstrip('-')):,}-digit integer"
        return digits
    if isinstance(value, str):
        return f"'{shorten(escape(value), limit)}'"
    return shorten(escape(str(value)), limit)


def json_for_terminal(text: str) -> str:
    """JSON text (as `json.dumps(..., ensure_ascii=False)` writes it) with the characters
    above that JSON leaves raw — DEL, C1, bidi controls, line separators — written as
    `\\uXXXX` escapes, which any JSON reader decodes back to the same value."""
    return _json_unsafe().sub(lambda match: f"\\u{ord(match.group()):04x}", text)
