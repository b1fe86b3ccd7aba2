"""Strict JSON for untrusted text (contracts, datasets, reports, backend answers), with the
place of every problem.

`loads` parses with the standard library's C parser and refuses what it would otherwise
accept silently or fail on with a traceback: duplicate keys (last one wins in `json`),
the literals `NaN` and `Infinity`, numbers that overflow a float (`1e999` reads as
infinity), integers longer than the interpreter converts, and nesting deeper than
`max_depth` (the parser recurses: 100,000 levels end in RecursionError, and so would every
recursive walk over the result). Valid text is parsed once; only a refused text is walked a
second time by a small tokenizer that finds the first problem's line, column and path
(`requirements.max_nll`, `0.metadata`). `key_lines` gives, for a valid text, the line of
every key and list item, so a schema problem found later can name its line too.
`loads_object` parses a UTF-8 object with orjson where that is sure to give what `loads`
gives (backend answers, one per request).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from decflow.untrusted import escape, shorten

MAX_DEPTH = 100
Path = tuple[str | int, ...]

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|\s+', re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_CONSTANTS = ("NaN", "Infinity", "-Infinity")


def dotted(path: Path) -> str:
    """`a.b.0`: the form messages use for a place (keys escaped, a long path cut)."""
    return shorten(escape(".".join(str(part) for part in path)), 120)


class JsonProblem(ValueError):
    """A refused JSON text: `reason`, where (1-based `line` and `column`) and at which
    value (`path`, empty for the document itself or an unknown place)."""

    def __init__(self, reason: str, line: int, column: int, path: Path = ()) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        self.path = path
        super().__init__(str(self))

    def __str__(self) -> str:
        at = f"{dotted(self.path)}: " if self.path else ""
        return f"line {self.line}, column {self.column}: {at}{self.reason}"


class _Refused(ValueError):
    """Raised by the parser hooks; the tokenizer then finds the place."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Refused("duplicate key")
    return result


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` for `json.loads` where a caller places errors itself (the record
    readers): raises ValueError naming a repeated key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise _Refused(name)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused("out of range")
    return value


# One decoder for every text: `json.loads` with hooks builds a new decoder and scanner per
# call, which cost more than parsing a short text (a backend answer, a dataset line).
_DECODER = json.JSONDecoder(object_pairs_hook=_unique, parse_constant=_constant,
                            parse_float=_finite)


def values_over(text: str | bytes | bytearray, limit: int) -> int:
    """How many values a JSON text may hold when that can pass `limit`, else 0. Counted
    without parsing (commas, brackets and braces, those inside strings too, bound the
    values from above), so a text that would take gigabytes as Python objects (60 MB of
    `[],` are 21 million lists, 2-3 GB) is refused before it is parsed."""
    if len(text) <= limit:
        return 0
    if isinstance(text, str):
        found = 1 + text.count(",") + text.count("[") + text.count("{")
    else:
        found = 1 + text.count(b",") + text.count(b"[") + text.count(b"{")
    return found if found > limit else 0


def loads(text: str, *, max_depth: int = MAX_DEPTH, max_values: int | None = None) -> Any:
    """Parse `text`; raise JsonProblem (a ValueError) naming the first problem's place.
    With `max_values`, a text that may hold more values is refused unparsed."""
    if max_values is not None and (found := values_over(text, max_values)):
        raise JsonProblem(f"up to {found:,} values; at most {max_values:,} are read", 1, 1)
    try:
        if text.startswith("\ufeff"):  # as `json.loads` refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        path = _Walk(text, max_depth).path_at(exc.pos)
        raise JsonProblem(exc.msg, exc.lineno, exc.colno, path) from None
    except (ValueError, RecursionError) as exc:
        raise _Walk(text, max_depth).problem() or JsonProblem(str(exc), 1, 1) from None
    # Counting brackets (strings included) bounds the depth: most texts need no walk.
    if text.count("[") + text.count("{") > max_depth and _too_deep(value, max_depth):
        raise _Walk(text, max_depth).problem() or JsonProblem("nested too deeply", 1, 1)
    return value


# A key's closing quote and its colon (a quote and colon inside a string only add to the count).
_KEY_ENDS = re.compile(rb'"[ \t\n\r]*:')
# orjson reads integers beyond 64 bits (19 digits and more) as floats; Python's floats from
# JSON this large are rare enough to be left to `loads` with them.
_INTEGER_LIMIT = 9.2e18


def loads_object(raw: bytes, *, max_depth: int = MAX_DEPTH) -> dict[str, Any] | None:
    """The JSON object in `raw` (UTF-8) parsed by orjson, faster than `loads`, when it is
    certainly what `loads(decode_utf8(raw))` gives; else None (`loads` then parses it and
    names any problem). orjson refuses what `loads` refuses (NaN, Infinity, numbers that
    overflow a float, invalid UTF-8, control characters in strings) and rounds floats as
    Python does; what it would read otherwise is left to `loads`: a byte-order mark
    (refused), integers beyond 64 bits (read as floats: any float of that size is left to
    `loads`), more than `max_depth` brackets, and duplicate keys (orjson keeps the last):
    every key parsed has its own closing quote and colon in the text, so a text with a
    duplicate has more of them than the parse has keys."""
    if raw.count(b"[") + raw.count(b"{") > max_depth:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict or _keys(value) != len(_KEY_ENDS.findall(raw)):
        return None
    return value


def _keys(value: dict[str, Any]) -> int:
    """How many keys the objects in `value` (as orjson makes them) have, nested ones
    included; -1 if it holds a float beyond the 64-bit integers."""
    count = 0
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if type(item) is dict:
            count += len(item)
            children = item.values()
        else:
            children = item
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                pending.append(child)
            elif kind is float and not -_INTEGER_LIMIT < child < _INTEGER_LIMIT:
                return -1
    return count


def _too_deep(value: Any, max_depth: int) -> bool:
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > max_depth:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def problems(text: str, *, max_depth: int = MAX_DEPTH) -> list[JsonProblem]:
    """Every problem `loads` would refuse `text` for, in document order: the one it raises,
    then the others (syntax errors aside, which end the parse)."""
    try:
        loads(text, max_depth=max_depth)
    except JsonProblem as first:
        found = list(_Walk(text, max_depth).problems())
        if all(str(problem) != str(first) for problem in found):
            found.append(first)
        return sorted(found, key=lambda problem: (problem.line, problem.column))
    return []


def key_lines(text: str) -> dict[Path, int]:
    """For a valid JSON text: the line of every object key and list item, by path."""
    lines: dict[Path, int] = {}
    _Walk(text, sys.maxsize, lines).problem()
    return lines


def _atom_problem(token: str) -> str | None:
    if token in _CONSTANTS:
        return f"{token} is not a JSON number"
    number = _NUMBER.fullmatch(token)
    if number is None:
        return None  # true, false, null, or a syntax error the parser reports
    if number.group(1) or number.group(2):
        if math.isinf(float(token)):
            return f"the number {shorten(token, 40)} is out of range (a float overflows)"
        return None
    digits = len(token.lstrip("-"))
    limit = sys.get_int_max_str_digits()
    if limit and digits > limit:
        return f"an integer of {digits:,} digits is too long (at most {limit:,})"
    return None


@dataclass
class _Frame:
    """An object or array being read, and where in it the reader is."""

    path: Path
    is_object: bool
    key: str = ""
    index: int = 0
    expect_key: bool = True
    first_lines: dict[str, int] = field(default_factory=dict)

    def child(self) -> Path:
        if self.is_object:
            return self.path if self.expect_key else (*self.path, self.key)
        return (*self.path, self.index)


class _Walk:
    """One pass over the tokens of a JSON text, tracking the path of every value."""

    def __init__(self, text: str, max_depth: int, lines: dict[Path, int] | None = None) -> None:
        self.text = text
        self.max_depth = max_depth
        self.lines = lines
        self.stack: list[_Frame] = []
        self._line = 1
        self._counted = 0

    def _place(self, pos: int) -> tuple[int, int]:
        # Tokens come in order, so newlines are counted once overall.
        self._line += self.text.count("\n", self._counted, pos)
        self._counted = pos
        return self._line, pos - self.text.rfind("\n", 0, pos)

    def _tokens(self) -> Iterator[tuple[int, str]]:
        for match in _TOKENS.finditer(self.text):
            token = match.group()
            if not token[0].isspace():
                yield match.start(), token

    def path_at(self, stop: int) -> Path:
        """The path of the value being read at offset `stop`."""
        for pos, token in self._tokens():
            if pos >= stop:
                break
            if self._step(pos, token) is not None:
                break
        return self.stack[-1].child() if self.stack else ()

    def problem(self) -> JsonProblem | None:
        return next(self.problems(), None)

    def problems(self) -> Iterator[JsonProblem]:
        """Every problem in document order; the walk ends at one nested too deeply."""
        for pos, token in self._tokens():
            found = self._step(pos, token)
            if found is not None:
                yield found
                if found.reason.startswith("nested deeper"):
                    return

    def _step(self, pos: int, token: str) -> JsonProblem | None:
        top = self.stack[-1] if self.stack else None
        first = token[0]
        if top is not None and top.is_object and top.expect_key and first == '"':
            return self._key(top, pos, token)
        if first == ":":
            return None
        if first == ",":
            if top is not None and top.is_object:
                top.expect_key = True
            elif top is not None:
                top.index += 1
            return None
        if first in "]}":
            if self.stack:
                self.stack.pop()
            return None
        path = top.child() if top is not None else ()
        if top is not None and not top.is_object and self.lines is not None:
            self.lines[path] = self._place(pos)[0]
        if first in "[{":
            if len(self.stack) >= self.max_depth:
                return JsonProblem(
                    f"nested deeper than {self.max_depth} levels", *self._place(pos), path
                )
            self.stack.append(_Frame(path, is_object=first == "{"))
            return None
        reason = None if first == '"' else _atom_problem(token)
        return None if reason is None else JsonProblem(reason, *self._place(pos), path)

    def _key(self, top: _Frame, pos: int, token: str) -> JsonProblem | None:
        try:
            key = json.loads(token)
        except ValueError:
            return None  # a malformed string: the parser reports it
        top.key, top.expect_key = key, False
        path = (*top.path, key)
        line, column = self._place(pos)
        first = top.first_lines.get(key)
        if first is not None:
            return JsonProblem(
                f"duplicate key (first defined on line {first})", line, column, path
            )
        top.first_lines[key] = line
        if self.lines is not None:
            self.lines[path] = line
        return None
