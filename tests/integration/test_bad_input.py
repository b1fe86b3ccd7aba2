"""Bad input through every reader, as one table: reader × failure class.

Failure classes: encodings (Latin-1, invalid UTF-8, UTF-16), byte-order marks, NUL bytes,
huge numbers (a 400-digit integer, an integer past Python's conversion limit, `1e999`),
deep nesting, non-finite numbers (NaN, Infinity), duplicate keys and very long lines, plus
the reader's own everyday mistakes (a misspelt key, a wrong type).

Files go through the command line as a user runs it (`decflow validate`, `report`, `check`)
and must end with exit 2 and one `error:` message that names the file, the place (line,
column, case or row, field) and, where there is something to do, what to do; never a
traceback or an `internal error`, never a raw control character, never a message
thousands of characters long. Backend answers come from a real server on 127.0.0.1 through
the call engine and must end as a typed per-case error naming the place (`invalid_response`;
`unavailable` for a broken HTTP frame, as DecGuard's outcome table says), never as
`exception`.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from decflow.backends.base import Backend, DecisionSpec
from decflow.backends.engine import RemoteCaller
from decflow.backends.http import HttpBackend
from decflow.backends.openai import OpenAIBackend
from decflow.backends.systemone import SystemOneBackend
from decflow.contracts.providers import HttpSettings, OpenAISettings, SystemOneSettings
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.servers.raw import Raw, RawServer
from tests.support.servers.recording import RecordingServer, Reply

REFUND = ROOT / "contracts" / "refund" / "decflow.yaml"
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if c != 0x0A] + ["\u202e"]
MAX_MESSAGE = 3000
TO_UTF8 = "save it as UTF-8"
HUGE = "9" * 5000  # past Python's 4,300-digit conversion limit
BIG = "9" * 400  # an integer no float can hold
DEEP = 100_000
LONG = 300_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    reader: str
    failure: str
    content: bytes | Callable[[dict[str, Any]], bytes]  # a callable edits the base report
    place: tuple[str, ...] = ()  # what the message must say besides the file's name
    accepted: bool = False  # a variant the reader takes

    @property
    def id(self) -> str:
        return f"{self.reader}:{self.failure}"


MINIMAL = 'schema_version: "0.1"\ndecision: {name: d, type: noul}\nbackend: {provider: mock}\n'


def yaml_contract(extra: str) -> bytes:
    return (MINIMAL + extra).encode()


def json_contract(extra: str) -> bytes:
    """A JSON contract, one key per line; `extra` is spliced in as the last key (line 8+)."""
    head = json.dumps(
        {"schema_version": "0.1", "decision": {"name": "d", "type": "noul"},
         "backend": {"provider": "mock"}}, indent=2)
    return (head[:-2] + ",\n  " + extra + "\n}").encode()


def jsonl(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


RECORD = (ROOT / "contracts" / "refund" / "production.jsonl").read_text().splitlines()[0]
GOOD_RECORD = RECORD.replace('"p1"', '"p0"')


def records_jsonl(bad: str = RECORD) -> bytes:
    """A good record, then `bad` on line 2 (an empty `bad`: the good record alone)."""
    return jsonl(GOOD_RECORD, bad) if bad else jsonl(GOOD_RECORD)


def latency(value: str) -> str:
    return RECORD.replace('"latency_ms":42.0', f'"latency_ms":{value}')


def timestamp(value: str) -> str:
    return RECORD.replace('"timestamp":"2026-09-24T09:00:00Z"', f'"timestamp":"{value}"')


def utc_instants(*texts: str) -> pl.Series:
    """Typed UTC timestamps, built by polars (Python's datetime has no year 0)."""
    return pl.Series(texts).str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_unit="us",
                                            time_zone="UTC")


def records_parquet(**columns: list[Any] | pl.Series) -> bytes:
    base: dict[str, list[Any] | pl.Series] = {
        "id": ["p1"], "decision": ["refund_request"], "input": ["The blender arrived damaged."],
        "probabilities": [{"refund": 0.96, "reject": 0.01, "review": 0.03}],
        "selected": ["refund"], "latency_ms": [42.0], "metadata_json": ['{"locale": "en"}'],
    }
    return parquet(pl.DataFrame({**base, **columns}))


def report_edit(edit: Callable[[str], str], indent: int | None = 1) -> Callable[
    [dict[str, Any]], bytes
]:
    return lambda report: edit(json.dumps(report, indent=indent, ensure_ascii=False)).encode()


def report_set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], bytes]:
    def edit(report: dict[str, Any]) -> bytes:
        document = json.loads(json.dumps(report))
        target = document
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return json.dumps(document, indent=1).encode()

    return edit


GOOD_CASE = '{"id": "a", "input": "hi", "expected": "yes"}'

ROWS: list[Row] = [
    # contracts, YAML
    Row("contract.yaml", "misspelt-key", yaml_contract("requirments: {min_accuracy: 0.9}\n"),
        ("line 4: requirments: unknown field (check the spelling)",)),
    Row("contract.yaml", "wrong-type", yaml_contract("evaluation:\n  calibration_bins: many\n"),
        ("line 5: evaluation.calibration_bins: expected an integer, got the string 'many'",)),
    Row("contract.yaml", "latin-1", (MINIMAL + "# caf\xe9\n").encode("latin-1"),
        ("line 4, column 6: byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("contract.yaml", "invalid-utf8", yaml_contract("x: ") + b"\xff\xfe\n",
        ("line 4, column 4: byte 0xff is not UTF-8", TO_UTF8)),
    Row("contract.yaml", "utf-16", MINIMAL.encode("utf-16"), ("the file is UTF-16", TO_UTF8)),
    Row("contract.yaml", "utf-8-bom", b"\xef\xbb\xbf" + MINIMAL.encode(), accepted=True),
    Row("contract.yaml", "nul-byte", yaml_contract("x: a\x00b\n"),
        ("line 4, column 5: NUL byte", TO_UTF8)),
    Row("contract.yaml", "control-character", yaml_contract("x: a\x1b]0;t\x07\n"),
        ("invalid YAML: line 4, column 5: character '\\x1b' is not allowed",)),
    Row("contract.yaml", "huge-integer",
        yaml_contract(f"evaluation: {{max_concurrency: {HUGE}}}\n"),
        ("line 4: evaluation.max_concurrency: an integer of 5,000 digits is too long",)),
    Row("contract.yaml", "400-digit-integer", yaml_contract(f"requirements: {{max_nll: {BIG}}}\n"),
        ("line 4: requirements.max_nll: must be a finite number, got a 400-digit integer",)),
    Row("contract.yaml", "1e999", yaml_contract("requirements: {max_nll: 1.0e+999}\n"),
        ("line 4: requirements.max_nll: must be a finite number, got inf",)),
    Row("contract.yaml", "exponent-read-as-text", yaml_contract("requirements: {max_nll: 1e9}\n"),
        ("line 4: requirements.max_nll: expected a number, got the string '1e9' (YAML reads an "
         "exponent without a decimal point as text: write 1.0e-3)",)),
    Row("contract.yaml", "nan", yaml_contract("requirements: {max_nll: .nan}\n"),
        ("line 4: requirements.max_nll: must be a finite number, got nan",)),
    Row("contract.yaml", "deep-nesting", yaml_contract(f"x: {nested(DEEP)}\n"),
        ("invalid YAML: line 4, column", "nesting depth")),
    Row("contract.yaml", "deep-nesting-within-libyaml", yaml_contract(f"x: {nested(500)}\n"),
        ("line 4: x.0.0", "nested deeper than 100 levels")),
    Row("contract.yaml", "duplicate-key", yaml_contract("backend: {provider: mock}\n"),
        ("line 4: backend: duplicate key (first defined on line 3)",)),
    Row("contract.yaml", "long-line", yaml_contract("k" * LONG + ": 1\n"),
        ("invalid YAML: line 4, column 300001: could not find expected ':'",)),
    Row("contract.yaml", "long-value", yaml_contract(f"requirments: {'v' * LONG}\n"),
        ("line 4: requirments: unknown field",)),
    # contracts, JSON
    Row("contract.json", "misspelt-key", json_contract('"requirments": {}'),
        ("line 10: requirments: unknown field (check the spelling)",)),
    Row("contract.json", "latin-1", json_contract('"x": "caf\xe9"').decode().encode("latin-1"),
        ("line 10, column 12: byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("contract.json", "utf-16", json_contract('"x": 1').decode().encode("utf-16"),
        ("the file is UTF-16", TO_UTF8)),
    Row("contract.json", "utf-8-bom", b"\xef\xbb\xbf" + json_contract('"warnings": {}'),
        accepted=True),
    Row("contract.json", "nul-byte", json_contract('"x": "\x00"'),
        ("line 10, column 9: NUL byte", TO_UTF8)),
    Row("contract.json", "nan", json_contract('"requirements": {"max_nll": NaN}'),
        ("invalid JSON: line 10, column 31: requirements.max_nll: NaN is not a JSON number",)),
    Row("contract.json", "infinity", json_contract('"requirements": {"max_nll": -Infinity}'),
        ("line 10, column 31: requirements.max_nll: -Infinity is not a JSON number",)),
    Row("contract.json", "1e999", json_contract('"requirements": {"max_nll": 1e999}'),
        ("line 10, column 31: requirements.max_nll: the number 1e999 is out of range",)),
    Row("contract.json", "huge-integer",
        json_contract(f'"evaluation": {{"max_concurrency": {HUGE}}}'),
        ("line 10, column 37: evaluation.max_concurrency: an integer of 5,000 digits",)),
    Row("contract.json", "400-digit-integer",
        json_contract(f'"requirements": {{"max_nll": {BIG}}}'),
        ("line 10: requirements.max_nll: must be a finite number, got a 400-digit integer",)),
    Row("contract.json", "deep-nesting", json_contract(f'"x": {nested(DEEP)}'),
        ("invalid JSON: line 10, column 107: x.0.0", "nested deeper than 100 levels")),
    Row("contract.json", "duplicate-key", json_contract('"backend": {"provider": "mock"}'),
        ("line 10, column 3: backend: duplicate key (first defined on line 7)",)),
    Row("contract.json", "long-line", json_contract(f'"{"k" * LONG}": 1'),
        ("line 10: kkkk", "more characters)")),
    # golden datasets, JSONL (`decflow validate CONTRACT -d FILE`)
    Row("dataset.jsonl", "unknown-label", jsonl(GOOD_CASE, '{"input": "x", "expected": "maybe"}'),
        ("line 2: unknown label 'maybe' (the contract defines: no, yes)",)),
    Row("dataset.jsonl", "latin-1", jsonl(GOOD_CASE, '{"input": "caf\xe9"}').decode().encode(
        "latin-1"), ("line 2, column 15: byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("dataset.jsonl", "invalid-utf8", jsonl(GOOD_CASE) + b'{"input": "\xc3\x28"}\n',
        ("line 2, column 12: byte 0xc3 is not UTF-8", TO_UTF8)),
    Row("dataset.jsonl", "utf-16", jsonl(GOOD_CASE).decode().encode("utf-16"),
        ("the file is UTF-16", TO_UTF8)),
    Row("dataset.jsonl", "utf-16-without-bom", jsonl(GOOD_CASE).decode().encode("utf-16-le"),
        ("line 1, column 2: NUL byte", TO_UTF8)),
    Row("dataset.jsonl", "utf-8-bom", b"\xef\xbb\xbf" + jsonl(GOOD_CASE), accepted=True),
    Row("dataset.jsonl", "nul-byte", jsonl(GOOD_CASE) + b'{"input": "a"}\x00\n',
        ("line 2, column 15: NUL byte", TO_UTF8)),
    Row("dataset.jsonl", "line-separator-in-a-string", jsonl('{"input": "a\u2028b"}'),
        accepted=True),
    Row("dataset.jsonl", "duplicate-key", jsonl(GOOD_CASE, '{"input": "a", "input": "b"}'),
        ("line 2, column 16: invalid JSON: input: duplicate key",)),
    Row("dataset.jsonl", "nan", jsonl('{"input": "a", "metadata": {"score": NaN}}'),
        ("line 1, column 38: invalid JSON: metadata.score: NaN is not a JSON number",)),
    Row("dataset.jsonl", "infinity", jsonl('{"input": {"n": Infinity}}'),
        ("line 1, column 17: invalid JSON: input.n: Infinity is not a JSON number",)),
    Row("dataset.jsonl", "1e999", jsonl('{"input": "a", "metadata": {"score": 1e999}}'),
        ("line 1, column 38: invalid JSON: metadata.score: the number 1e999 is out of range",)),
    Row("dataset.jsonl", "huge-integer", jsonl(f'{{"input": {{"n": {HUGE}}}}}'),
        ("line 1, column 17: invalid JSON: input.n: an integer of 5,000 digits",)),
    Row("dataset.jsonl", "400-digit-integer", jsonl(f'{{"input": "a", "expected": {BIG}}}'),
        ("line 1: unknown label '9999", "(320 more characters)")),
    Row("dataset.jsonl", "deep-nesting",
        jsonl(f'{{"input": "a", "metadata": {{"x": {nested(DEEP)}}}}}'),
        ("line 1, column 132: invalid JSON: metadata.x.0.0", "nested deeper than 100 levels")),
    Row("dataset.jsonl", "long-line", jsonl(f'{{"input": "a", "expected": "{"z" * LONG}"}}'),
        ("line 1: unknown label 'zzzz", "more characters)")),
    Row("dataset.jsonl", "control-characters",
        jsonl('{"input": "a", "expected": "\\u001b]0;x\\u0007"}'),
        ("line 1: unknown label '\\x1b]0;x\\x07'",)),
    # golden datasets, JSON lists
    Row("dataset.json", "unknown-label", f'[{GOOD_CASE},\n {{"input": "x", "expected": "maybe"}}]'
        .encode(), ("case 2 (line 2): unknown label 'maybe'",)),
    Row("dataset.json", "latin-1", '[{"input": "caf\xe9"}]'.encode("latin-1"),
        ("line 1, column 16: byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("dataset.json", "utf-16", f"[{GOOD_CASE}]".encode("utf-16"), ("the file is UTF-16",)),
    Row("dataset.json", "utf-8-bom", f"\ufeff[{GOOD_CASE}]".encode(), accepted=True),
    Row("dataset.json", "nul-byte", b'[{"input": "a\x00"}]', ("line 1, column 14: NUL byte",)),
    Row("dataset.json", "duplicate-key",
        f'[{GOOD_CASE},\n {{"input": "b",\n  "input": "c"}}]'.encode(),
        ("case 2 (line 3, column 3): invalid JSON: input: duplicate key (first defined on "
         "line 2)",)),
    Row("dataset.json", "nan", b'[\n {"input": "a", "metadata": {"x": NaN}}]',
        ("case 1 (line 2, column 35): invalid JSON: metadata.x: NaN is not a JSON number",)),
    Row("dataset.json", "1e999", b'[{"input": {"p": 1e999}}]',
        ("case 1 (line 1, column 18): invalid JSON: input.p: the number 1e999 is out of range",)),
    Row("dataset.json", "huge-integer", f'[{{"input": "a", "id": {HUGE}}}]'.encode(),
        ("case 1 (line 1, column 23): invalid JSON: id: an integer of 5,000 digits",)),
    Row("dataset.json", "deep-nesting", f"[{nested(DEEP)}]".encode(),
        ("case 1 (line 1, column 101)", "nested deeper than 100 levels")),
    Row("dataset.json", "long-line", f'[{{"input": "a", "id": "{"i" * LONG}"}}, '
        f'{{"input": "b", "id": "{"i" * LONG}"}}]'.encode(),
        ("case 2 (line 1): duplicate case id 'iiii", "more characters)")),
    # golden datasets, CSV
    Row("dataset.csv", "unknown-label", b"input,expected\nhi,yes\nho,maybe\n",
        ("row 2: unknown label 'maybe'",)),
    Row("dataset.csv", "latin-1", "input,expected\ncaf\xe9,yes\n".encode("latin-1"),
        ("line 2, column 4: byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("dataset.csv", "utf-16", "input,expected\nhi,yes\n".encode("utf-16"),
        ("the file is UTF-16", TO_UTF8)),
    Row("dataset.csv", "utf-8-bom", b"\xef\xbb\xbfinput,expected\nhi,yes\n", accepted=True),
    Row("dataset.csv", "nul-byte", b"input,expected\nh\x00i,yes\n",
        ("line 2, column 2: NUL byte", TO_UTF8)),
    Row("dataset.csv", "duplicate-column", b"input,expected,input\nhi,yes,ho\n",
        ("line 1: column 'input' appears more than once",)),
    Row("dataset.csv", "duplicate-key-in-a-cell",
        b'input,metadata_json\nhi,"{""a"": 1, ""a"": 2}"\n',
        ("row 1: metadata_json, column 10 of the cell: invalid JSON: a: duplicate key",)),
    Row("dataset.csv", "nan-in-a-cell", b'input,metadata_json\nhi,"{""x"": NaN}"\n',
        ("row 1: metadata_json, column 7 of the cell: invalid JSON: x: NaN is not a JSON "
         "number",)),
    Row("dataset.csv", "huge-integer-in-a-cell",
        f'input_json\n"{{""n"": {HUGE}}}"\n'.encode(),
        ("row 1: input_json, column 7 of the cell: invalid JSON: n: an integer of 5,000 "
         "digits",)),
    Row("dataset.csv", "deep-nesting-in-a-cell", f"input,metadata_json\nhi,{nested(DEEP)}\n"
        .encode(), ("row 1: metadata_json, column 101 of the cell", "nested deeper than 100")),
    Row("dataset.csv", "long-line", f"input,expected\nhi,{'z' * LONG}\n".encode(),
        ("row 1: unknown label 'zzzz", "more characters)")),
    # golden datasets, Parquet
    Row("dataset.parquet", "not-parquet", b"PAR1 this is not parquet PAR1",
        ("cannot read dataset",)),
    Row("dataset.parquet", "nan-in-a-struct",
        parquet(pl.DataFrame({"input": [{"text": "a", "score": float("nan")}]})),
        ("row 1: input is not plain JSON data",)),
    Row("dataset.parquet", "date-in-a-struct",
        parquet(pl.DataFrame({"input": [{"text": "a", "day": date(2026, 1, 1)}]})),
        ("row 1: input is not plain JSON data",)),
    Row("dataset.parquet", "timestamp-column",
        parquet(pl.DataFrame({"input": ["a"], "id": utc_instants("0000-12-31T23:30:00Z")})),
        ("column 'id' has type Datetime", "ids, inputs and labels are text")),
    Row("dataset.parquet", "year-0-in-a-struct", parquet(pl.DataFrame({"input": pl.DataFrame({
        "text": ["a", "b"], "when": utc_instants("0000-12-31T23:30:00Z").extend_constant(
            None, 1).reverse()}).to_struct("input")})),
        ("row 2: input is not plain JSON data (a date or time outside the years 1 to 9999)",)),
    Row("dataset.parquet", "nan-label", parquet(pl.DataFrame({"input": ["a"],
                                                             "expected": [float("nan")]})),
        ("row 1: expected nan is not a label",)),
    Row("dataset.parquet", "deep-nesting-in-a-cell",
        parquet(pl.DataFrame({"input_json": ['{"x": ' + nested(DEEP) + "}"]})),
        ("row 1: input_json, column 106 of the cell", "nested deeper than 100")),
    Row("dataset.parquet", "huge-integer-in-a-cell",
        parquet(pl.DataFrame({"input": ["a"], "metadata_json": [f'{{"n": {HUGE}}}']})),
        ("row 1: metadata_json, column 7 of the cell: invalid JSON: n: an integer of 5,000",)),
    Row("dataset.parquet", "long-line",
        parquet(pl.DataFrame({"input": ["a"], "expected": ["z" * LONG]})),
        ("row 1: unknown label 'zzzz", "more characters)")),
    # run reports (`decflow report FILE`): a real run's report.json, edited
    Row("report", "latin-1", lambda r: json.dumps(r, indent=1, ensure_ascii=False).replace(
        "blender", "bl\xe9nder", 1).encode("latin-1"),
        ("not a JSON report: line", "byte 0xe9 is not UTF-8", TO_UTF8)),
    Row("report", "utf-16", lambda r: json.dumps(r).encode("utf-16"),
        ("not a JSON report: the file is UTF-16", TO_UTF8)),
    Row("report", "utf-8-bom", lambda r: b"\xef\xbb\xbf" + json.dumps(r).encode(), accepted=True),
    Row("report", "nul-byte", lambda r: json.dumps(r).encode() + b"\x00",
        ("not a JSON report: line 1, column", "NUL byte")),
    Row("report", "nan", report_edit(lambda t: t.replace('"confidence_threshold": 0.8',
                                                         '"confidence_threshold": NaN')),
        ("not a JSON report: line", "evaluation.confidence_threshold: NaN is not a JSON number")),
    Row("report", "1e999", report_edit(lambda t: t.replace('"calibration_bins": 10',
                                                           '"calibration_bins": 1e999')),
        ("evaluation.calibration_bins: the number 1e999 is out of range",)),
    Row("report", "huge-integer", report_edit(lambda t: t.replace('"exit_code": 0',
                                                                  f'"exit_code": {HUGE}')),
        ("exit_code: an integer of 5,000 digits",)),
    Row("report", "400-digit-integer", report_set(("evaluation", "confidence_threshold"), 10**399),
        ("evaluation.confidence_threshold: must be a finite number, got a 400-digit integer",)),
    Row("report", "deep-nesting", report_edit(lambda t: t.replace(
        '"metadata": {\n    "locale": "en"\n   }', f'"metadata": {nested(DEEP)}', 1)),
        ("results.0.metadata.0.0", "nested deeper than 108 levels")),
    Row("report", "duplicate-key", report_edit(lambda t: t.replace(
        '"status": "pass",', '"status": "pass",\n "status": "fail",', 1)),
        ("status: duplicate key (first defined on line",)),
    Row("report", "wrong-type", report_set(("results", 3, "result"), "refund"),
        ("results.3.result: expected a mapping",)),
    Row("report", "missing-field", report_set(("checks", 0), {"gate": "min_accuracy"}),
        ("checks.0.level: required field is missing",)),
    Row("report", "tampered", report_set(("results", 0, "result", "confidence"), 0.5),
        ("results.0.result: selected/confidence is not the argmax",)),
    Row("report", "long-line", report_edit(lambda t: t.replace('"calibration_bins": 10',
                                                               '"calibration_bins": NaN'),
                                           indent=None),
        ("line 1, column", "evaluation.calibration_bins: NaN")),
    # production records (`decflow check CONTRACT -d FILE`): refund's first record, edited
    Row("records.jsonl", "latin-1", records_jsonl(RECORD.replace("blender", "bl\xe9nder"))
        .decode().encode("latin-1"),
        ("line 2: input: byte", "is not valid UTF-8 (is the file Latin-1?", TO_UTF8)),
    Row("records.jsonl", "invalid-utf8", records_jsonl("").replace(b"blender", b"bl\xc3(nder"),
        ("line 1: input: byte", "is not valid UTF-8", TO_UTF8)),
    Row("records.jsonl", "utf-16", records_jsonl().decode().encode("utf-16"),
        ("the file is UTF-16", TO_UTF8)),
    Row("records.jsonl", "utf-16-without-bom", records_jsonl().decode().encode("utf-16-le"),
        ("line 1: byte 2 holds a NUL byte", "is the file UTF-16?", TO_UTF8)),
    Row("records.jsonl", "utf-8-bom", b"\xef\xbb\xbf" + records_jsonl(),
        ("line 1: the file starts with a UTF-8 byte-order mark; save it as UTF-8 without",)),
    Row("records.jsonl", "nul-byte", records_jsonl(RECORD.replace('"en"', '"e\x00n"')),
        ("line 2: metadata: byte", "holds a NUL byte", TO_UTF8)),
    Row("records.jsonl", "duplicate-key", records_jsonl(RECORD.replace('{"id":"p1"',
                                                                       '{"id":"p1","id":"p2"')),
        ("line 2: invalid JSON: duplicate key 'id'",)),
    Row("records.jsonl", "nan", records_jsonl(latency("NaN")),
        ("line 2: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.jsonl", "infinity", records_jsonl(latency("-Infinity")),
        ("line 2: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.jsonl", "1e999", records_jsonl(latency("1e999")),
        ("line 2: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.jsonl", "400-digit-integer", records_jsonl(latency(BIG)),
        ("line 2: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.jsonl", "huge-integer", records_jsonl(latency(HUGE)),
        ("line 2: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.jsonl", "huge-integer-in-metadata",
        records_jsonl(RECORD.replace('"locale":"en"', f'"locale":"en","n":{HUGE}')),
        accepted=True),  # metadata may hold any JSON number (Arrow reads this one as inf)
    Row("records.jsonl", "deep-nesting", records_jsonl(RECORD.replace(
        '"locale":"en"', f'"locale":"en","x":{nested(DEEP)}')),
        ("line 2: invalid JSON: metadata: nested too deeply to parse (keep records under 512",)),
    Row("records.jsonl", "long-line", records_jsonl(RECORD.replace('"selected":"refund"',
                                                                   f'"selected":"{"z" * LONG}"')),
        ("line 2: selected 'zzzz", "more characters)' is not one of the contract labels",)),
    Row("records.jsonl", "long-input", records_jsonl(RECORD.replace(
        "The blender arrived damaged.", "z" * LONG)), accepted=True),
    Row("records.jsonl", "control-characters", records_jsonl(RECORD.replace(
        '"selected":"refund"', '"selected":"\\u001b]0;x\\u0007"')),
        ("line 2: selected '\\x1b]0;x\\x07' is not one of the contract labels",)),
    Row("records.jsonl", "misspelt-key", records_jsonl(RECORD.replace('"latency_ms"',
                                                                      '"latncy_ms"')),
        ("line 2: invalid production record:", "latncy_ms: unknown field (check the spelling)")),
    Row("records.jsonl", "wrong-type", records_jsonl(latency('"fast"')),
        ("line 2: invalid production record:", "latency_ms: must be a number")),
    Row("records.jsonl", "year-zero", records_jsonl(timestamp("0000-09-24T09:00:00Z")),
        ("line 2: invalid production record:", "timestamp: must be an ISO 8601 timestamp")),
    Row("records.jsonl", "year-zero-with-offset",
        records_jsonl(timestamp("0000-09-24T09:00:00+02:00")),
        ("line 2: invalid production record:", "timestamp: must be an ISO 8601 timestamp")),
    # valid, though the instant in UTC is in year 0 or 10000 (outside Python's datetime)
    Row("records.jsonl", "instant-in-year-0-utc",
        records_jsonl(timestamp("0001-01-01T00:30:00+01:00")), accepted=True),
    Row("records.jsonl", "instant-in-year-10000-utc",
        records_jsonl(timestamp("9999-12-31T23:30:00-01:00")), accepted=True),
    # production records, Parquet
    Row("records.parquet", "not-parquet", b"PAR1 this is not parquet PAR1",
        ("not a readable Parquet file",)),
    Row("records.parquet", "nan", records_parquet(latency_ms=[float("nan")]),
        ("row 1: invalid production record:", "latency_ms: must be a finite number")),
    Row("records.parquet", "nan-label", records_parquet(
        probabilities=[{"refund": float("nan"), "reject": 0.01, "review": 0.03}]),
        ("row 1: probability of 'refund' must be finite, got nan",)),
    Row("records.parquet", "huge-integer-in-a-cell", records_parquet(
        metadata_json=[f'{{"locale": "en", "n": {HUGE}}}']), accepted=True),
    Row("records.parquet", "deep-nesting-in-a-cell", records_parquet(
        metadata_json=['{"x": ' + nested(DEEP) + "}"]),
        ("row 1: metadata_json: invalid JSON: x: nested too deeply to parse",)),
    Row("records.parquet", "duplicate-key-in-a-cell", records_parquet(
        metadata_json=['{"locale": "en", "locale": "fr"}']),
        ("row 1: metadata_json: invalid JSON: duplicate key 'locale'",)),
    Row("records.parquet", "long-line", records_parquet(selected=["z" * LONG]),
        ("row 1: selected 'zzzz", "more characters)' is not one of the contract labels")),
    Row("records.parquet", "control-characters", records_parquet(selected=["\x1b]0;x\x07"]),
        ("row 1: selected '\\x1b]0;x\\x07' is not one of the contract labels",)),
    Row("records.parquet", "wrong-type", records_parquet(latency_ms=["fast"]),
        ("column 'latency_ms' has type String, expected",)),
    Row("records.parquet", "timestamp-in-year-0", records_parquet(timestamp=utc_instants(
        "0000-12-31T23:30:00Z")),
        ("row 1: invalid production record:", "timestamp: must be an ISO 8601 timestamp")),
]


def dataset_contract(tmp_path: Path) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(MINIMAL)
    return path


def run_report_file(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "base.json"
    code, _, err = run_cli("test", str(REFUND), "--store", str(tmp_path / "store"), "-o", str(out))
    assert code == 0, err
    return json.loads(out.read_text())


# reader -> (file name, command line for that file)
FILE_READERS: dict[str, tuple[str, Callable[[Path, Path], list[str]]]] = {
    "contract.yaml": ("contract.yaml", lambda file, _: ["validate", str(file)]),
    "contract.json": ("contract.json", lambda file, _: ["validate", str(file)]),
    **{
        f"dataset.{suffix}": (f"cases.{suffix}", lambda file, tmp: [
            "validate", str(dataset_contract(tmp)), "-d", str(file)])
        for suffix in ("jsonl", "json", "csv", "parquet")
    },
    "report": ("report.json", lambda file, tmp: ["report", str(file), "--store",
                                                  str(tmp / "store")]),
    **{
        f"records.{suffix}": (f"records.{suffix}", lambda file, tmp: [
            "check", str(REFUND), "-d", str(file), "--store", str(tmp / "store")])
        for suffix in ("jsonl", "parquet")
    },
}


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_report_file(tmp_path_factory.mktemp("base"))


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_file(row: Row, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    name, command = FILE_READERS[row.reader]
    content = row.content
    if callable(content):
        content = content(request.getfixturevalue("base_report"))
    file = tmp_path / name
    file.write_bytes(content)
    code, out, err = run_cli(*command(file, tmp_path))
    if row.accepted:  # read: exit 0, or 1 for a check whose gates fail on a few records
        assert code == 0 or (code == 1 and row.reader.startswith("records.")), err
        return
    assert code == 2, (out, err)
    assert err.startswith(f"error: {file}"), err[:500]
    assert "internal error" not in err and "Traceback" not in err
    for part in row.place:
        assert part in err, (part, err[:1000])
    assert not [c for c in CONTROL if c in err], err[:500]
    assert len(err) < MAX_MESSAGE, err[:500]


def test_every_reader_meets_every_failure_class() -> None:
    """The table covers each reader with the classes that apply to it."""
    classes = {
        "encoding": {"latin-1", "invalid-utf8", "utf-16", "utf-16-without-bom"},
        "byte-order mark": {"utf-8-bom", "utf-16"},
        "NUL byte": {"nul-byte", "utf-16-without-bom"},
        "huge number": {"huge-integer", "400-digit-integer", "1e999", "huge-integer-in-a-cell",
                        "nan-label", "huge-integer-in-metadata"},
        "deep nesting": {"deep-nesting", "deep-nesting-in-a-cell"},
        "non-finite number": {"nan", "infinity", "1e999", "nan-in-a-cell", "nan-in-a-struct",
                              "nan-label"},
        "duplicate key": {"duplicate-key", "duplicate-column", "duplicate-key-in-a-cell"},
        "long line": {"long-line"},
    }
    exempt = {(f"{kind}.parquet", name) for kind in ("dataset", "records")
              # binary format: the text classes sit in cells
              for name in ("encoding", "byte-order mark", "NUL byte")}
    exempt.add(("dataset.parquet", "duplicate key"))  # Parquet refuses repeated column names
    for reader in FILE_READERS:
        failures = {row.failure for row in ROWS if row.reader == reader}
        for name, members in classes.items():
            if (reader, name) not in exempt:
                assert failures & members, (reader, name)


# -- backend answers -------------------------------------------------------------------------

CHOICE = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"), "Refund?")
NOUL = DecisionSpec("is_spam", "noul", ("spam", "ham"), "Spam?")
TEAM = DecisionSpec("team", "choice", ("billing", "shipping", "technical"), "Team?")  # openai


def probabilities(refund: str = "0.7") -> str:
    return f'"probabilities": {{"refund": {refund}, "reject": 0.1, "review": 0.2}}'


@dataclass(frozen=True)
class Answer:
    backend: str  # http, systemone-choice, systemone-noul, openai
    failure: str
    body: bytes  # the JSON body, or with `raw` the whole HTTP response
    place: tuple[str, ...]
    kind: str | None = "invalid_response"  # None: the answer is accepted
    raw: bool = False

    @property
    def id(self) -> str:
        return f"{self.backend}:{self.failure}"


def http_body(text: str) -> bytes:
    return ("{" + text + "}").encode()


def systemone(answer: str, name: str = "refund_request") -> bytes:
    return ('{"model": "jev", "answers": {"' + name + '": ' + answer + "}}").encode()


def openai(logprob: str) -> bytes:
    top = '{"token": "billing", "logprob": ' + logprob + "}"
    return ('{"model": "m", "choices": [{"logprobs": {"content": [{"token": "billing", '
            '"logprob": -0.1, "top_logprobs": [' + top + "]}]}}]}").encode()


def raw_response(head: str) -> bytes:
    return f"HTTP/1.1 200 OK\r\n{head}\r\n\r\n".encode("latin-1")


ANSWERS: list[Answer] = [
    Answer("http", "400-digit-probability", http_body(probabilities(BIG)),
           ("probability of 'refund' is a 400-digit integer, not a finite value >= 0",)),
    Answer("http", "huge-integer", http_body(probabilities(HUGE)),
           ("line 1, column 30: probabilities.refund: an integer of 5,000 digits",)),
    Answer("http", "1e999", http_body(probabilities("1e999")),
           ("line 1, column 30: probabilities.refund: the number 1e999 is out of range",)),
    Answer("http", "nan", http_body(probabilities("NaN")),
           ("line 1, column 30: probabilities.refund: NaN is not a JSON number",)),
    Answer("http", "infinity", http_body(probabilities("Infinity")),
           ("probabilities.refund: Infinity is not a JSON number",)),
    Answer("http", "deep-metadata", http_body(probabilities() + f', "metadata": {{"x": '
                                              f'{nested(DEEP)}}}'),
           ("metadata.x.0.0", "nested deeper than 100 levels")),
    Answer("http", "duplicate-key", http_body(probabilities() + ", " + probabilities("0.1")),
           ("probabilities: duplicate key",)),
    Answer("http", "latin-1", http_body(probabilities() + ', "model": "caf\xe9"').decode()
           .encode("latin-1"), ("response is not valid JSON: line 1, column", "byte 0xe9")),
    Answer("http", "utf-16", http_body(probabilities()).decode().encode("utf-16"),
           ("response is not valid JSON: the file is UTF-16",)),
    Answer("http", "nul-byte", http_body(probabilities()) + b"\x00", ("NUL byte",)),
    Answer("http", "utf-8-bom", b"\xef\xbb\xbf" + http_body(probabilities()), (), kind=None),
    Answer("http", "long-unknown-label", http_body(
        f'"probabilities": {{"refund": 0.7, "reject": 0.1, "review": 0.2, "{"z" * LONG}": 0}}'),
        ("unknown labels ['zzzz", "more characters)")),
    Answer("http", "control-characters-in-a-label", http_body(
        '"probabilities": {"refund": 0.7, "reject": 0.1, "rev\\u001b]0;x\\u0007": 0.2}'),
        ("unknown labels ['rev\\x1b]0;x\\x07']",)),
    Answer("http", "unicode-digit-content-length", raw_response("Content-Length: \xb2"),
           ("failed: RemoteProtocolError",), kind="unavailable", raw=True),
    Answer("http", "huge-content-length", raw_response(f"Content-Length: {HUGE}"),
           ("failed: RemoteProtocolError",), kind="unavailable", raw=True),
    Answer("http", "long-header-line", raw_response("X-Pad: " + "p" * (2 << 20)),
           ("failed: RemoteProtocolError",), kind="unavailable", raw=True),
    Answer("systemone-choice", "400-digit-probability", systemone(
        '{"type": "choice", "choice": "refund", ' + probabilities(BIG) + "}"),
        ("probability of 'refund' is a 400-digit integer",)),
    Answer("systemone-choice", "deep-answer", systemone(nested(DEEP)),
           ("answers.refund_request.0.0", "nested deeper than 100 levels")),
    Answer("systemone-choice", "long-type", systemone('{"type": "' + "t" * LONG + '"}'),
           ("answer type 'tttt", "more characters)' does not match")),
    Answer("systemone-noul", "400-digit-noul", systemone(f'{{"type": "noul", "noul": {BIG}}}',
                                                        "is_spam"),
           ("noul answer a 400-digit integer is not a number in [0, 1]",)),
    Answer("systemone-noul", "1e999-noul", systemone('{"type": "noul", "noul": 1e999}',
                                                     "is_spam"),
           ("answers.is_spam.noul: the number 1e999 is out of range",)),
    Answer("openai", "400-digit-logprob", openai(BIG),
           ("the logprob of token 'billing' is a 400-digit integer, not a log-probability",)),
    Answer("openai", "overflowing-logprob", openai("1e308"),
           ("the logprob of token 'billing' is 1e+308, not a log-probability",)),
    Answer("openai", "nan-logprob", openai("NaN"),
           ("choices.0.logprobs.content.0.top_logprobs.0.logprob: NaN is not a JSON number",)),
    Answer("openai", "deep-body", b'{"choices": ' + nested(DEEP).encode() + b"}",
           ("choices.0.0", "nested deeper than 100 levels")),
]


def make_backend(kind: str, url: str) -> tuple[Backend, DecisionSpec]:
    if kind == "http":
        return HttpBackend("default", "m", HttpSettings.model_validate({"url": url}), CHOICE), \
            CHOICE
    if kind.startswith("systemone"):
        spec = CHOICE if kind.endswith("choice") else NOUL
        settings = SystemOneSettings.model_validate({"url": url})
        return SystemOneBackend("default", "jev", settings, spec), spec
    settings = OpenAISettings.model_validate({"url": url})
    return OpenAIBackend("default", "m", settings, TEAM), TEAM


def decide_once(backend: Backend, spec: DecisionSpec) -> dict[str, Any]:
    """One request through the call engine; the row it records."""
    n = len(spec.labels)
    requests = pl.DataFrame({
        "request_id": ["r1"], "input_text": ["x"], "input_json": [None],
        "shown_labels": [list(spec.labels)], "label_order": [list(range(n))],
    }, schema_overrides={"input_json": pl.String})
    chunks: list[pl.DataFrame] = []

    async def scenario() -> None:
        try:
            await RemoteCaller(backend, spec, 0.001, 1).run(requests, spec.labels, chunks.append)
        finally:
            await backend.aclose()

    asyncio.run(scenario())
    (row,) = pl.concat(chunks).to_dicts()
    return row


@pytest.mark.parametrize("answer", ANSWERS, ids=[a.id for a in ANSWERS])
def test_answer(answer: Answer) -> None:
    if answer.raw:
        server: RawServer | RecordingServer = RawServer([Raw(answer.body, close=True)])
    else:
        # the openai backend first asks the server's tokenizer endpoints: none here
        probes = [Reply(404, b"{}")] * 2 if answer.backend == "openai" else []
        server = RecordingServer(script=[*probes, Reply(200, answer.body)])
    with server:
        path = "/v1" if answer.backend == "openai" else "/decide"
        row = decide_once(*make_backend(answer.backend, server.url(path)))
    assert row["error_kind"] == answer.kind, row
    if answer.kind is None:
        return
    message = row["error_message"]
    for part in answer.place:
        assert part in message, (part, message[:1000])
    assert not [c for c in CONTROL if c in message], message[:500]
    assert len(message) <= 1000 + len("… (999,999 more characters)")


def test_answers_end_to_end_through_the_cli(tmp_path: Path) -> None:
    """The two answers of the issue, through `decflow test` with an http backend: each
    case ends as `invalid_response` in the stored report, the run itself completes."""
    bodies = [http_body(probabilities(BIG)), http_body(probabilities() + ', "metadata": '
                                                       + nested(DEEP))]

    def reply(request: Any) -> Reply:
        case = request.json()["case_id"]
        return Reply(200, bodies[int(case[1:]) - 1] if case in ("c1", "c2") else
                     http_body(probabilities()))

    (tmp_path / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{i}", "input": "x", "expected": "refund"}) + "\n"
                for i in (1, 2, 3)))
    with RecordingServer(reply) as server:
        contract = tmp_path / "c.yaml"
        contract.write_text(
            'schema_version: "0.1"\n'
            "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
            f"backend: {{provider: http, url: '{server.url('/decide')}'}}\n"
            "dataset: cases.jsonl\n")
        code, out, err = run_cli("test", str(contract), "--no-healthcheck", "--store",
                                 str(tmp_path / "store"), "-f", "json")
    assert code == 1, err  # two of three cases errored: the error-rate gate fails
    errors = {r["case_id"]: r["error"] for r in json.loads(out)["results"]}
    assert errors["c1"]["kind"] == "invalid_response"
    assert "400-digit integer" in errors["c1"]["message"]
    assert errors["c2"]["kind"] == "invalid_response"
    assert "nested deeper than 100 levels" in errors["c2"]["message"]
    assert errors["c3"] is None
