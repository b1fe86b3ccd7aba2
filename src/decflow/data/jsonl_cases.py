"""The fast path of a JSONL golden dataset: the cases table `load_golden` would build, or
None wherever that cannot be proved, and the strict path (`decflow.strictjson` per line,
then every rule row by row) reads the file instead and gives its table or its error.

The strict path costs ~6 µs a case, most of the cases stage of a 20k-case run. Here orjson
parses each line and the row rules are checked a column at a time. orjson accepts nothing
the standard library's parser refuses, but reads some texts to other values, each ruled
out before a table is returned:
- duplicate keys (orjson keeps the last, silently). In valid JSON every `:` is either the
  one after a key or inside a string, so the text's colons equal the keys plus the colons
  of every decoded key and string, unless a dropped duplicate is missing from the parse
  (then fewer) or a colon was written as the escape `\\u003a` (such texts go strict);
- integers past 64 bits (orjson reads them as floats): no float may appear at all, which
  also keeps a float's text out of the question;
- nesting (orjson allows 1,024 levels, the strict parser 100): a row nested 100 levels
  deep goes strict; so do lines long enough for the strict value count to matter and
  texts longer than a quarter of `MAX_FIELD_BYTES` in characters (the size the strict
  path measures in UTF-8 bytes). orjson refuses lone surrogate escapes by itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

import orjson
import polars as pl

from decflow.data.bounds import MAX_FIELD_BYTES, MAX_JSON_VALUES
from decflow.data.case_table import CASES_SCHEMA, ROW_FIELD_SET, compact_json
from decflow.strictjson import MAX_DEPTH

# a character takes at most 4 bytes of UTF-8: texts this long need no encoding to be sized
_SHORT_TEXT = MAX_FIELD_BYTES // 4
_NO_ID = object()


def jsonl_cases(text: str, labels: Collection[str]) -> pl.DataFrame | None:
    """The cases of a JSONL dataset's text (its BOM removed), or None: read it strictly."""
    lines = [line.removesuffix("\r") for line in text.split("\n") if line.strip()]
    if not lines or "\\u003" in text:
        return None
    if len(text) > MAX_JSON_VALUES and max(map(len, lines)) > MAX_JSON_VALUES:
        return None
    try:
        rows = [orjson.loads(line) for line in lines]
    except orjson.JSONDecodeError:
        return None
    if not all(type(row) is dict for row in rows):
        return None
    if not ROW_FIELD_SET.issuperset(set().union(*rows)):
        return None
    keys = sum(map(len, rows))
    ids = _ids(rows)
    inputs = _inputs([row.get("input") for row in rows])
    expected = _expected([row.get("expected") for row in rows], labels)
    metadata = _metadata([row.get("metadata") for row in rows])
    if ids is None or inputs is None or expected is None or metadata is None:
        return None
    input_text, input_json, input_keys, input_colons = inputs
    metadata_json, metadata_keys, metadata_colons = metadata
    texts = (ids, input_text, input_json, expected, metadata_json)
    if not all(_storable(column) for column in texts):
        return None
    colons = (_colons(ids) + _colons(input_text) + _colons(expected) + input_colons
              + metadata_colons)
    if keys + input_keys + metadata_keys + colons != text.count(":"):
        return None  # a duplicate key (or a text only the strict path can place)
    return pl.DataFrame(
        {"case_id": ids, "input_text": input_text, "input_json": input_json,
         "expected": expected, "metadata_json": metadata_json,
         "position": range(1, len(rows) + 1)},
        schema=CASES_SCHEMA,
    )


def _ids(rows: list[dict[str, Any]]) -> list[str] | None:
    """Each row's id (`case-<n>` where it has none), unique and non-blank."""
    ids = [row.get("id", _NO_ID) for row in rows]
    if _NO_ID in ids:
        ids = [f"case-{n}" if case_id is _NO_ID else case_id
               for n, case_id in enumerate(ids, start=1)]
    try:
        if not all(map(str.strip, ids)):
            return None
    except TypeError:  # an id that is no string
        return None
    return ids if len(set(ids)) == len(ids) else None


def _inputs(values: list[Any]) -> (
    tuple[list[str | None], list[str | None], int, int] | None
):
    """(input_text, input_json, keys and colons of the objects) of string or object inputs."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return values, [None] * len(values), 0, 0
    if not kinds <= {str, dict}:
        return None
    objects = [value for value in values if type(value) is dict]
    counts = _nested(objects)
    if counts is None:
        return None
    texts = [value if type(value) is str else None for value in values]
    encoded = iter([compact_json(value, allow_nan=False) for value in objects])
    return (texts, [None if type(value) is str else next(encoded) for value in values],
            *counts)


def _expected(values: list[Any], labels: Collection[str]) -> list[str | None] | None:
    """The labels (an integer is a score level: its digits), each one of `labels`."""
    allowed: set[Any] = {*labels, None}
    try:
        if set(values) <= allowed:
            return values
    except TypeError:  # a list or object
        return None
    levels = [str(value) if type(value) is int else value for value in values]
    return levels if set(levels) <= allowed else None


def _metadata(values: list[Any]) -> tuple[list[str | None], int, int] | None:
    """(metadata_json, keys and colons of the objects): absent or null is `{}`."""
    if not set(map(type, values)) <= {dict, type(None)}:
        return None
    objects = [value for value in values if value]
    counts = _nested(objects)
    if counts is None:
        return None
    return ([compact_json(value, allow_nan=False) if value else "{}" for value in values],
            *counts)


def _nested(objects: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(keys, colons of keys and strings) inside the objects of rows, or None for a float or
    a nesting the strict parser may refuse."""
    keys = colons = 0
    pending: list[tuple[dict[str, Any] | list[Any], int]] = [(item, 2) for item in objects]
    while pending:
        item, depth = pending.pop()
        if depth >= MAX_DEPTH:
            return None
        if type(item) is dict:
            keys += len(item)
            colons += "".join(item).count(":")
            children: Iterable[Any] = item.values()
        else:
            children = item
        for child in children:
            kind = type(child)
            if kind is str:
                colons += child.count(":")
            elif kind is dict or kind is list:
                pending.append((child, depth + 1))
            elif kind is float:
                return None
    return keys, colons


def _colons(texts: Sequence[str | None]) -> int:
    return "".join(text for text in texts if text is not None).count(":")


def _storable(texts: Sequence[str | None]) -> bool:
    """Every text short enough to store without measuring its UTF-8 (longer ones are left
    to the strict path). orjson refuses lone surrogates, the strict check's other concern."""
    return max((len(text) for text in texts if text is not None), default=0) <= _SHORT_TEXT
