"""The JSONL fast path of golden datasets against the strict path: on every text, hostile
ones first, `load_golden` gives the table or the error the strict path (each line by
`decflow.strictjson`, each row by the row checker) gives, and the fast path declines the
texts orjson reads differently."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from decflow.data import golden_dataset
from decflow.data import jsonl_cases as jsonl_cases_module
from decflow.data.bounds import MAX_FIELD_BYTES, MAX_JSON_VALUES
from decflow.data.golden_dataset import load_golden
from decflow.data.jsonl_cases import jsonl_cases
from decflow.errors import DatasetError

LABELS = ("refund", "reject", "review", "1", "4", "a:b")


def outcome(path: Path, *, strict: bool = False) -> tuple[str, Any]:
    """("table", its rows and dtypes) or ("error", the message) of `load_golden`; with
    `strict`, of the strict path alone."""
    with pytest.MonkeyPatch.context() as patch:
        if strict:
            patch.setattr(golden_dataset, "jsonl_cases", lambda *_: None)
        try:
            cases = load_golden(path, LABELS).cases
        except DatasetError as exc:
            return "error", str(exc)
    return "table", (cases.rows(), cases.schema)


def same_as_strict(tmp_path: Path, text: str | bytes, name: str = "d.jsonl") -> tuple[str, Any]:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(text)
    strict = outcome(path, strict=True)
    assert outcome(path) == strict
    return strict


def declined(line: str) -> bool:
    return jsonl_cases((line + "\n").encode("utf-8", "surrogatepass"), LABELS) is None


GOOD = '{"id": "c1", "input": "The blender arrived.", "expected": "refund"}'


@pytest.mark.parametrize(
    "line",
    [
        # duplicate keys at any depth, spelled alike or by escapes, with colons around
        '{"input": "a", "input": "b"}',
        '{"id": "x", "input": "a", "id": "y"}',
        '{"input": {"t": 1, "t": 2}}',
        '{"input": "a", "metadata": {"k": [{"z": 1, "z": 1}]}}',
        '{"input": "a:b", "input": "c"}',
        '{"input": "a", "\\u0069nput": "b"}',
        '{"id": "a\\u003a", "input": "x", "input": "y"}',
        '{"id": "a\\u003A", "input": "x", "input": "y"}',
        '{"input": "a", "metadata": {"a:b": 1, "a:b": 2}}',
        # what orjson reads to other values or refuses
        '{"input": "a", "metadata": {"n": 18446744073709551616}}',
        '{"input": "a", "metadata": {"n": -9223372036854775809}}',
        '{"input": {"n": 1' + "0" * 30 + "}}",
        '{"input": "a", "expected": 18446744073709551616}',
        '{"input": "a", "metadata": {"n": 1' + "0" * 4400 + "}}",
        '{"input": "a", "metadata": {"x": 0.1}}',
        '{"input": {"x": 1e999}}',
        '{"input": {"x": -1e999}}',
        '{"input": {"x": 1e-999}}',
        '{"input": {"x": NaN}}',
        '{"input": {"x": Infinity}}',
        '{"input": {"x": -Infinity}}',
        '{"input": "\\ud800"}',
        '{"input": "\\udc00x"}',
        '{"input": "a", "id": "\\ud800\\u0041"}',
        '{"input": {"\\ud800": 1}}',
        '{"input": "a", "metadata": {"k": "\\udfff"}}',
        '\ufeff{"input": "a"}',
        '{"input": "a"}\ufeff',
        '{"input": "a\x01"}',
        '{"input": "a",}',
        '{"input": "a"} {"input": "b"}',
        '{"input": "a"}\x0c',
        '\xa0{"input": "a"}',
        # nesting around the strict limit (the row is level 1)
        '{"input": "a", "metadata": {"m": ' + "[" * 97 + "]" * 97 + "}}",
        '{"input": "a", "metadata": {"m": ' + "[" * 98 + "]" * 98 + "}}",
        '{"input": "a", "metadata": {"m": ' + "[" * 99 + "]" * 99 + "}}",
        '{"input": "a", "metadata": {"m": ' + "[" * 2000 + "]" * 2000 + "}}",
    ],
)
def test_hostile_lines_read_as_the_strict_path_reads_them(tmp_path: Path, line: str) -> None:
    same_as_strict(tmp_path, f"{GOOD}\n{line}\n")
    same_as_strict(tmp_path, f"{line}\n")


@pytest.mark.parametrize(
    "line",
    [
        '{"input": "a", "input": "b"}',
        '{"input": {"t": 1, "t": 2}}',
        '{"id": "a\\u003a", "input": "x", "input": "y"}',
        '{"input": "a", "metadata": {"n": 18446744073709551616}}',
        '{"input": "a", "metadata": {"x": 0.5}}',
        '{"input": "\\ud800"}',
        '{"input": "a", "metadata": {"m": ' + "[" * 99 + "]" * 99 + "}}",
    ],
)
def test_the_fast_path_declines_what_orjson_reads_otherwise(line: str) -> None:
    assert declined(line)


@pytest.mark.parametrize(
    "text",
    [
        GOOD + "\r\n" + GOOD.replace("c1", "c2") + "\r\n",
        "\n  \n" + GOOD + "\n\t\n\x0c\n",
        "\x1c\n\xa0\n\u2028\n" + GOOD + "\n",
        '{"input": "a"}\n{"input": "b", "id": "x"}\n{"input": "c"}\n',
        '{"input": "a", "id": "case-2"}\n{"input": "b"}\n',
        '{"input": "a", "id": "  "}\n',
        '{"input": "a", "id": 7}\n',
        '{"input": "a", "id": null}\n',
        '{"input": null}\n',
        '{"input": ["a"]}\n',
        '{"id": "x"}\n',
        '{"input": "a", "expected": 4}\n',
        '{"input": "a", "expected": 7}\n',
        '{"input": "a", "expected": true}\n',
        '{"input": "a", "expected": 1.0}\n',
        '{"input": "a", "expected": "a:b"}\n',
        '{"input": "a", "expected": ["refund"]}\n',
        '{"input": "a", "expected": null}\n',
        '{"input": "a", "metadata": null}\n',
        '{"input": "a", "metadata": {}}\n',
        '{"input": "a", "metadata": 3}\n',
        '{"input": "a", "metadata": false}\n',
        '{"input": "a", "metadata": 0}\n',
        '{"input": "a", "metadata": ""}\n',
        '{"input": "a", "metadata": []}\n',
        '{"input": "a", "metadata": {}}\n{"input": "b", "metadata": []}\n',
        '{"input": "a", "metadata": {"z": [1, "x:y", {"b": null}], "a": true}}\n',
        '{"input": {"text": "é ☃ 😀", "n": -0}}\n{"input": "plain"}\n',
        '{"input": "a", "extra": 1}\n',
        '["input"]\n',
        '"input"\n',
        "null\n",
        "\n \n",
        "",
        '{"input": "\\"quoted\\": \\\\", "id": "\\u00e9\\n"}\n',
        '{"input": "\\\\u003a"}\n',
        '{"input": "a" , "id" : "b"}\n',
        GOOD + "\n{bad\n",
        GOOD + "\n]\n",
        GOOD + '\n"no colon"\n',
    ],
)
def test_rows_and_row_errors_as_the_strict_path(tmp_path: Path, text: str) -> None:
    same_as_strict(tmp_path, text)


def test_bytes_that_are_not_utf8_and_a_leading_bom(tmp_path: Path) -> None:
    same_as_strict(tmp_path, b'{"input": "caf\xe9"}\n')
    same_as_strict(tmp_path, b'\xef\xbb\xbf{"input": "a"}\n')
    same_as_strict(tmp_path, b'{"input": "a\x00"}\n')
    same_as_strict(tmp_path, b'{"input": "a"}\x00\n')
    same_as_strict(tmp_path, b'\xef\xbb\xbf\xef\xbb\xbf{"input": "a"}\n')
    same_as_strict(tmp_path, b'{"input": "a"}\n\xef\xbb\xbf{"input": "b"}\n')
    same_as_strict(tmp_path, b'\xff\xfe{\x00"\x00')
    same_as_strict(tmp_path, b'{"input": "\xed\xa0\x80"}\n')  # a surrogate as UTF-8
    same_as_strict(tmp_path, b'{"input": "\xc0\xba"}\n')  # an overlong ':'
    same_as_strict(tmp_path, b'{"input": "\xf4\x90\x80\x80"}\n')  # past U+10FFFF
    same_as_strict(tmp_path, b'{"input": "a"}\r\n\r\n \t\x0b\x0c\r\n{"input": "b"}')


def test_texts_at_the_size_bounds(tmp_path: Path) -> None:
    for size in (MAX_FIELD_BYTES // 4, MAX_FIELD_BYTES // 4 + 1, MAX_FIELD_BYTES + 1):
        same_as_strict(tmp_path, json.dumps({"input": "x" * size}) + "\n")
    for size in (MAX_FIELD_BYTES // 4, MAX_FIELD_BYTES // 2 + 1):
        wide = {"input": "é" * size}
        same_as_strict(tmp_path, json.dumps(wide, ensure_ascii=False) + "\n")
    many = json.dumps({"input": "a", "metadata": {"v": [0] * MAX_JSON_VALUES}}) + "\n"
    assert same_as_strict(tmp_path, many)[0] == "error"


def test_a_line_past_the_longest_line_goes_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line's length without its newline, the last line's too, is held to the bound
    under which no text of the table needs the strict path's size checks."""
    line, other = GOOD.encode(), GOOD.replace("c1", "c2").encode()
    monkeypatch.setattr(jsonl_cases_module, "_LONGEST_LINE", len(line))
    assert jsonl_cases(line + b"\n" + other + b"\n", LABELS) is not None
    assert jsonl_cases(line + b"\n" + other, LABELS) is not None
    longer = GOOD.replace("c1", "c22").encode()
    assert jsonl_cases(line + b"\n" + longer + b"\n", LABELS) is None
    assert jsonl_cases(line + b"\n" + longer, LABELS) is None


FRAGMENTS = [
    '"id"', '"input"', '"expected"', '"metadata"', '"x"', '"a:b"', '"refund"', '"4"', "4",
    '"\\u0069nput"', '"\\u003a"', '"\\ud800"', '"\\"', '"é"', "1e999", "0.5", "NaN", "-0",
    "18446744073709551616", "true", "null", "{}", "[]", "{", "}", "[", "]", ":", ",", " ",
]


def random_line(rng: random.Random) -> str:
    """A row of random fields, or random fragments: mostly valid, often hostile."""
    if rng.random() < 0.2:
        return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12)))
    values = ['"t"', '"a:b"', '{"k": "v:w", "k2": [1, 2]}', '{"k": 1, "k": 2}', '"\\u003a"',
              "4", "0.5", '"refund"', "null", '{"n": 18446744073709551616}', '"\\ud83d\\ude00"']
    fields = [rng.choice(["id", "input", "expected", "metadata", "\\u0069d", "x"])
              for _ in range(rng.randint(1, 4))]
    body = ", ".join(f'"{field}": {rng.choice(values)}' for field in fields)
    return "{" + body + "}"


def test_random_datasets_read_as_the_strict_path(tmp_path: Path) -> None:
    rng = random.Random(37)
    kinds = set()
    for _ in range(300):
        lines = [random_line(rng) for _ in range(rng.randint(1, 4))]
        kinds.add(same_as_strict(tmp_path, rng.choice(["\n", "\r\n", "\n \n"]).join(lines))[0])
    assert kinds == {"table", "error"}


def test_a_dataset_that_may_hold_more_values_than_a_json_file_is_read_strictly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "".join(json.dumps({"id": f"c{n}", "input": "t", "metadata": {"v": [[], []]}}) + "\n"
                   for n in range(50))
    raw = text.encode()
    assert jsonl_cases(raw, LABELS) is not None
    monkeypatch.setattr(jsonl_cases_module, "MAX_JSON_FILE_VALUES", len(raw) // 20)
    assert jsonl_cases(raw, LABELS) is None


def test_a_plain_dataset_takes_the_fast_path() -> None:
    text = "".join(json.dumps({"id": f"c{n}", "input": "t", "expected": "refund",
                               "metadata": {"n": n, "tags": ["a:b"]}}) + "\n"
                   for n in range(50))
    assert jsonl_cases(text.encode(), LABELS) is not None
    assert jsonl_cases(b"\xef\xbb\xbf" + text.encode(), LABELS) is not None


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value without floats: what an object input or metadata may hold."""
    texts = ["", "a", "B", "é", "\uffff", "\U00010000", "\x7f", "\u2028", '"', "\\", "\x1f",
             "\n", "\x08", "a:b", "\ufeff", "ä\u0308"]
    kind = rng.randrange(7 if depth < 4 else 5)
    if kind == 0:
        return "".join(rng.choice(texts) for _ in range(rng.randint(0, 4)))
    if kind == 1:
        return rng.choice([0, -1, 7, 2**63 - 1, -(2**63), 2**64 - 1])
    if kind == 2:
        return rng.choice([True, False])
    if kind in (3, 4):
        return None
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(texts) + rng.choice(texts): random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def test_object_texts_as_compact_json_writes_them(tmp_path: Path) -> None:
    rng = random.Random(3337)
    objects = [{"k": random_value(rng), "v": random_value(rng)} for _ in range(400)]
    lines = [json.dumps({"id": f"c{n}", "input": value, "metadata": value}, ensure_ascii=False)
             for n, value in enumerate(objects)]
    text = "\n".join(lines) + "\n"
    assert same_as_strict(tmp_path, text)[0] == "table"
    assert jsonl_cases(text.encode(), LABELS) is not None


def test_every_character_and_key_order_as_compact_json_writes_them(tmp_path: Path) -> None:
    characters = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    keys = {c: n for n, c in enumerate([*characters[::97], "\uffff"])}
    lines = [json.dumps({"id": f"c{n}", "input": {"t": "".join(characters[n:n + 40_000])}},
                        ensure_ascii=False) for n in range(0, len(characters), 40_000)]
    lines.append(json.dumps({"input": "a", "metadata": keys}, ensure_ascii=False))
    text = "\n".join(lines)
    assert jsonl_cases(text.encode(), LABELS) is not None
    assert same_as_strict(tmp_path, text)[0] == "table"


def random_row_line(rng: random.Random, n: int) -> str:
    """A mostly valid row, as various writers spell it, now and then made hostile."""
    row: dict[str, Any] = {}
    if rng.random() < 0.9:
        row["id"] = rng.choice([f"c{n}", f"c{n}", f"case-{n + 1}", " ", "x:y", f"é{n}", "c0"])
    row["input"] = rng.choice(["t", "a:b", "\u2028", '"q"', {"text": "x"},
                               {"k": random_value(rng)}, random_value(rng)])
    if rng.random() < 0.6:
        row["expected"] = rng.choice(["refund", "review", 4, "4", None, "a:b", 1])
    if rng.random() < 0.5:
        row["metadata"] = rng.choice([None, {}, {"locale": "en"}, {"k": random_value(rng)},
                                      {"n": rng.choice([1, 2**64, 0.5, -(2**63) - 1])}])
    line = json.dumps(row, ensure_ascii=rng.random() < 0.5,
                      separators=rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")]))
    return rng.choice([
        line, line, line, line[:-1] + ', "input": "dup"}',
        line.replace('"input"', '"\\u0069nput"', 1), line.replace(":", "\\u003a", 1),
        line[:-1] + ', "id": "a\\u003a"}', "\ufeff" + line,
    ])


def test_random_rows_read_as_the_strict_path(tmp_path: Path) -> None:
    rng = random.Random(3737)
    kinds = set()
    taken = 0
    for _ in range(300):
        lines = [random_row_line(rng, n) for n in range(rng.randint(1, 5))]
        text = rng.choice(["\n", "\r\n", "\n \n"]).join(lines)
        kinds.add(same_as_strict(tmp_path, text)[0])
        taken += jsonl_cases(text.encode("utf-8", "surrogatepass"), LABELS) is not None
    assert kinds == {"table", "error"}
    assert taken > 20  # the fast path itself is exercised
