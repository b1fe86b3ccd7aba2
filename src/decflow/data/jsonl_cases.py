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
  deep goes strict; so do lines longer than the strict bounds on a line's values and a
  text's bytes. orjson refuses lone surrogate escapes and bytes that are not UTF-8.
"""

from __future__ import annotations

import codecs
import io
import itertools
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from decflow.data.bounds import MAX_FIELD_BYTES, MAX_JSON_FILE_VALUES, MAX_JSON_VALUES
from decflow.data.dataset_file import ROW_FIELD_SET
from decflow.strictjson import MAX_DEPTH, values_over

if TYPE_CHECKING:
    import polars as pl

# No text of the table is longer in UTF-8 than the line it comes from (an escape is never
# shorter than what it decodes to, and `compact_json` writes an object without floats in no
# more bytes than its source), so lines within this bound need neither the strict path's
# count of a line's values nor its size check of each text.
_LONGEST_LINE = min(MAX_JSON_VALUES, MAX_FIELD_BYTES)
_NO_ID = object()


@dataclass(frozen=True)
class CaseColumns:
    """A JSONL dataset's cases as columns of Python values, in the file's order, checked
    by every row rule but the ids' uniqueness (`jsonl_cases` counts them on its table).
    `input_json` None: every input is a text; `metadata_json` None: no case has metadata
    (`{}` each)."""

    ids: list[str]
    input_text: list[str | None]
    input_json: list[str | None] | None
    expected: list[str | None]
    metadata_json: list[str | None] | None


def jsonl_cases(raw: bytes, labels: Collection[str],
                columns: CaseColumns | None = None) -> pl.DataFrame | None:
    """The cases of a JSONL dataset's bytes, or None: read it strictly. Bytes orjson
    refuses (not UTF-8, a NUL, a UTF-16 mark) are left to the strict path to name.
    `columns`: what `case_columns` returned for these very bytes and labels (not parsed
    again)."""
    import polars as pl  # (`case_columns` needs none: see `CaseColumns`)

    from decflow.data.case_table import CASES_SCHEMA

    found = columns or case_columns(raw, labels)
    if found is None:
        return None
    rows = len(found.ids)
    cases = pl.DataFrame(
        {"case_id": found.ids, "input_text": found.input_text,
         "input_json": _same(None, rows) if found.input_json is None else found.input_json,
         "expected": found.expected,
         "metadata_json": (_same("{}", rows) if found.metadata_json is None
                           else found.metadata_json),
         "position": range(1, rows + 1)},
        schema=CASES_SCHEMA,
    )
    # counted by polars: a Python set of the ids costs four times as much
    return cases if cases.get_column("case_id").n_unique() == cases.height else None


def case_columns(raw: bytes, labels: Collection[str]) -> CaseColumns | None:
    """The cases of a JSONL dataset's bytes as columns (`CaseColumns`), or None where the
    strict path must read them (see the module's docstring)."""
    raw = raw.removeprefix(codecs.BOM_UTF8)
    # All lines are parsed before any is checked: at most the values a .json dataset may
    # hold at once (the strict path holds one line's values at a time).
    if values_over(raw, MAX_JSON_FILE_VALUES):
        return None
    rows = _rows(raw)
    if not rows or set(map(type, rows)) != {dict}:
        return None
    if not ROW_FIELD_SET.issuperset(set().union(*rows)):
        return None
    ids = _ids(rows)
    inputs = _inputs([row.get("input") for row in rows])
    expected = _expected([row.get("expected") for row in rows], labels)
    metadata = _metadata([row.get("metadata") for row in rows])
    if ids is None or inputs is None or expected is None or metadata is None:
        return None
    input_text, input_json, input_colons = inputs
    metadata_json, metadata_colons = metadata
    # The text's colons are at least its keys, which are at least the keys parsed: as many
    # colons as parsed top-level keys leaves no room for a dropped duplicate. Otherwise the
    # colons of the strings and objects must make up the difference exactly.
    keys = sum(map(len, rows))
    colons = raw.count(b":")
    if colons != keys and (b"\\u003" in raw or colons != keys + _colons(ids)
                           + _colons(input_text) + _colons(expected) + input_colons
                           + metadata_colons):
        return None
    return CaseColumns(ids, input_text, input_json, expected, metadata_json)


def _rows(raw: bytes) -> list[Any] | None:
    """Every non-blank line parsed, or None at the first line orjson refuses or longer
    than `_LONGEST_LINE`. Lines are read one at a time (each freed once parsed: a
    whole-file split costs a fifth more) and measured as they are read (a split to find
    the longest costs 4 ms for 20k lines)."""
    rows: list[Any] = []
    append = rows.append
    for line in io.BytesIO(raw):
        if len(line) > _LONGEST_LINE and len(line.removesuffix(b"\n")) > _LONGEST_LINE:
            return None
        try:
            append(orjson.loads(line))
        except orjson.JSONDecodeError:
            # ASCII whitespace only: a line the strict path also skips as blank
            if line.strip():
                return None
    return rows


def _ids(rows: list[dict[str, Any]]) -> list[str] | None:
    """Each row's id (`case-<n>` where it has none), non-blank (unique: checked on the
    table)."""
    ids = [row.get("id", _NO_ID) for row in rows]
    if _NO_ID in ids:
        ids = [f"case-{n}" if case_id is _NO_ID else case_id
               for n, case_id in enumerate(ids, start=1)]
    try:
        if not all(map(str.strip, ids)):
            return None
    except TypeError:  # an id that is no string
        return None
    return ids


def _inputs(values: list[Any]
            ) -> tuple[list[str | None], list[str | None] | None, int] | None:
    """(input_text, input_json (None: all texts), colons of the objects' texts) of string
    or object inputs."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return values, None, 0
    if not kinds <= {str, dict}:
        return None
    objects = _objects([value for value in values if type(value) is dict])
    if objects is None:
        return None
    encoded, colons = iter(objects[0]), objects[1]
    return ([value if type(value) is str else None for value in values],
            [None if type(value) is str else next(encoded) for value in values], colons)


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


def _metadata(values: list[Any]) -> tuple[list[str | None] | None, int] | None:
    """(metadata_json (None: `{}` in every row), colons of the objects' texts): absent or
    null is `{}`."""
    if values.count(None) == len(values):
        return None, 0
    if not set(map(type, values)) <= {dict, type(None)}:
        return None
    objects = _objects([value for value in values if value])
    if objects is None:
        return None
    encoded, colons = iter(objects[0]), objects[1]
    return [next(encoded) if value else "{}" for value in values], colons


def _objects(objects: list[dict[str, Any]]) -> tuple[list[str], int] | None:
    """The objects as `compact_json` writes them, and the colons of those texts (one per
    key, and those of keys and strings: orjson writes a colon as itself), or None for a
    float or a nesting the strict parser may refuse.

    orjson writes them (a tenth of the time): like `compact_json` it sorts keys by code
    point, writes no spaces, integers as digits, and each character the same way
    (tests/unit/test_jsonl_cases.py compares them all)."""
    level: list[Any] = objects
    depth = 2  # the row is level 1
    while level:
        if depth >= MAX_DEPTH:
            return None
        children = list(itertools.chain.from_iterable(
            item.values() if type(item) is dict else item for item in level))
        kinds = set(map(type, children))
        if float in kinds:
            return None
        level = ([child for child in children if type(child) is dict or type(child) is list]
                 if dict in kinds or list in kinds else [])
        depth += 1
    texts = [orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() for value in objects]
    return texts, "".join(texts).count(":")


def _same(value: str | None, rows: int) -> pl.Series:
    """A column of one text (or null) in every row: built by polars, not from a list of
    20k Python references (half the table's construction)."""
    import polars as pl

    return pl.repeat(value, rows, dtype=pl.String, eager=True)


def _colons(texts: list[str] | list[str | None]) -> int:
    return "".join(text for text in texts if text is not None).count(":")
