"""Strict JSON parsing with places, and decoding untrusted text files as UTF-8."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from decflow.strictjson import JsonProblem, key_lines, loads, loads_object, problems
from decflow.textfile import TextProblem, decode_utf8


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"a": {"b": [1, NaN]}}', "line 1, column 17: a.b.1: NaN is not a JSON number"),
        ('{"a": 1,\n "a": 2}', "line 2, column 2: a: duplicate key (first defined on line 1)"),
        ('[{"x": 1e999}]', "line 1, column 8: 0.x: the number 1e999 is out of range "
                           "(a float overflows)"),
        ('{"n": -' + "1" * 4301 + "}", "line 1, column 7: n: an integer of 4,301 digits is too "
                                      "long (at most 4,300)"),
        ('{"a": [1,\n  2 3]}', "line 2, column 5: a.1: Expecting ',' delimiter"),
        ('{"a": 1,}', "line 1, column 9: Expecting property name enclosed in double quotes"),
        ("[" * 101 + "]" * 101, "line 1, column 101: " + ".".join(["0"] * 100)[:120]
         + "… (79 more characters): nested deeper than 100 levels"),
    ],
)
def test_problems_name_line_column_and_path(text: str, shown: str) -> None:
    with pytest.raises(JsonProblem) as caught:
        loads(text)
    assert str(caught.value) == shown


def test_depth_limit_is_inclusive_and_survives_any_nesting() -> None:
    assert loads("[" * 100 + "]" * 100) is not None
    deep = '{"m": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(JsonProblem, match="nested deeper than 100 levels"):
        loads(deep)
    assert loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(JsonProblem, match="line 1, column 2: 0: nested deeper than 1 levels"):
        loads("[[1]]", max_depth=1)


def test_valid_json_is_parsed_as_the_standard_library_does() -> None:
    text = '{"a": [1, 2.5, -0, "\\u00e9\\n"], "b": {"c": null, "d": true}, "e": 1e308}'
    assert loads(text) == {"a": [1, 2.5, 0, "é\n"], "b": {"c": None, "d": True}, "e": 1e308}


def test_every_problem_is_listed_in_document_order() -> None:
    text = '{"a": NaN,\n "b": {"x": 1, "x": 2},\n "c": Infinity}'
    assert [str(p) for p in problems(text)] == [
        "line 1, column 7: a: NaN is not a JSON number",
        "line 2, column 16: b.x: duplicate key (first defined on line 2)",
        "line 3, column 7: c: Infinity is not a JSON number",
    ]
    assert problems('{"ok": 1}') == []


def test_key_lines() -> None:
    text = '{"a": 1,\n "b": {"c": [\n  1,\n  {"d": 2}]}}'
    assert key_lines(text) == {
        ("a",): 1, ("b",): 2, ("b", "c"): 2, ("b", "c", 0): 3, ("b", "c", 1): 4,
        ("b", "c", 1, "d"): 4,
    }


def test_keys_in_messages_are_escaped() -> None:
    with pytest.raises(JsonProblem) as caught:
        loads('{"\\u001b]0;x\\u0007": 1, "\\u001b]0;x\\u0007": 2}')
    assert "\x1b" not in str(caught.value)
    assert "\\x1b]0;x\\x07: duplicate key" in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\ncafé".encode("latin-1"), "line 2, column 4: byte 0xe9 is not UTF-8 (is the file "
                                      "Latin-1 or Windows-1252?); save it as UTF-8"),
        ("x".encode("utf-16"), "the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                               "save it as UTF-8"),
        ("x".encode("utf-16-be"), "line 1, column 1: NUL byte: a text file has none (is it "
                                  "binary, or UTF-16 without a byte-order mark?); save it as "
                                  "UTF-8 text"),
        ("x".encode("utf-32"), "the file is UTF-32 (it starts with a UTF-32 byte-order mark); "
                               "save it as UTF-8"),
        (b"ok\n\xff\x00", "line 2, column 1: byte 0xff is not UTF-8 (is the file Latin-1 or "
                          "Windows-1252?); save it as UTF-8"),
        (b"\xc3\xa9\x00\xff", "line 1, column 2: NUL byte: a text file has none (is it binary, "
                              "or UTF-16 without a byte-order mark?); save it as UTF-8 text"),
    ],
)
def test_text_files_that_are_not_utf8(raw: bytes, shown: str) -> None:
    with pytest.raises(TextProblem) as caught:
        decode_utf8(raw)
    assert str(caught.value) == shown


def test_utf8_with_and_without_byte_order_mark() -> None:
    assert decode_utf8("café".encode()) == "café"
    assert decode_utf8(b"\xef\xbb\xbf" + "café".encode()) == "café"
    assert decode_utf8(b"") == ""


# -- loads_object: orjson where it gives what `loads` gives --------------------------------------

_REFUSED = object()


def _strict(raw: bytes) -> Any:
    try:
        return loads(decode_utf8(raw))
    except (TextProblem, JsonProblem):
        return _REFUSED


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, floats bit for bit (-0.0 is not 0.0), keys in order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _random_value(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice(["true", "false", "null"])
    if kind == 1:
        return str(rng.randint(-(10 ** rng.randint(1, 22)), 10 ** rng.randint(1, 22)))
    if kind == 2:
        bits = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        return repr(bits) if math.isfinite(bits) else "1e999"
    if kind == 3:
        mantissa = "".join(rng.choices("0123456789", k=rng.randint(1, 25))).lstrip("0") or "0"
        fraction = "".join(rng.choices("0123456789", k=rng.randint(1, 25)))
        return f"{rng.choice(['', '-'])}{mantissa}.{fraction}e{rng.randint(-400, 400)}"
    if kind in (4, 5):
        pieces = ["a", "é", "😀", '\\"', "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\ud800",
                  '\\":', "x:", "\\u0000", "\t", "NaN"]
        return '"' + "".join(rng.choices(pieces, k=rng.randint(0, 6))) + '"'
    if kind == 6:
        return "[" + ", ".join(_random_value(rng, depth + 1)
                               for _ in range(rng.randint(0, 4))) + "]"
    return _random_object(rng, depth + 1)


def _random_object(rng: random.Random, depth: int) -> str:
    keys = rng.choices(["a", "b", "c", 'q\\"', "é", "k:"], k=rng.randint(0, 5))  # repeats too
    colon = rng.choice([":", " : ", ":\n"])
    return "{" + ",".join(f'"{key}"{colon}{_random_value(rng, depth)}' for key in keys) + "}"


EDGES = [
    b'{"a":1,"a":2}', b'{"a":{"b":1,"b":1}}', b'{"a":"x\\":","a":1}', b'{"k\\"":1}',
    b'{"a" : 1 ,\n "b"\t:\r[1,2]}', b'{"a":NaN}', b'{"a":Infinity}', b'{"a":-Infinity}',
    b'{"a":1e999}', b'{"a":-1e400}', b'{"a":1e-400}', b'{"a":-0}', b'{"a":-0.0}',
    b'{"a":1234567890123456789}', b'{"a":123456789012345678}', b'{"a":-9223372036854775808}',
    b'{"a":123456789012345678901234567890}', b'{"a":0.1234567890123456789012}',
    b'\xef\xbb\xbf{"a":1}', b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}', b'{"a":"\\ud800"}',
    b'{"a":"\\ud83d\\ude00"}', b'{"a":"\x01"}', b'{"a":"\\u0000"}', b'{"a":1}\x00',
    b'[1]', b'"x"', b"1", b"", b"{", b'{"a":1,}', b'{"a":01}',
    b'{"a":' * 99 + b"1" + b"}" * 99, b'{"a":' * 100 + b"1" + b"}" * 100,
    b'{"a":' * 101 + b"1" + b"}" * 101,
]


def test_loads_object_gives_what_loads_gives_or_leaves_it_to_loads() -> None:
    rng = random.Random(37)
    texts = EDGES + [_random_object(rng, 0).encode() for _ in range(20_000)]
    fast = 0
    for raw in texts:
        value = loads_object(raw)
        if value is not None:
            fast += 1
            strict = _strict(raw)
            assert strict is not _REFUSED and _same(value, strict), raw
    assert fast > 5_000  # most objects without repeated keys or long integers take it


def test_loads_object_takes_the_common_answers() -> None:
    for raw in [b'{"probabilities": {"refund": 0.7, "reject": 0.1, "review": 0.2}}',
                b'{"probabilities":{"a":1,"b":0},"model":"m","metadata":{"k":[1,"x",null]}}']:
        value = loads_object(raw)
        assert value is not None and _same(value, _strict(raw))
