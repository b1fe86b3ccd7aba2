"""Record validation: every rule of the record table, errors naming file and line (row for
Parquet), the same verdicts on the vectorized and the strict path, ids across partitions."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from decflow.data.records import reader as records_module
from decflow.data.records.reader import RecordReader, RecordSpec, list_partitions
from decflow.errors import DatasetError

SPEC = RecordSpec("refund_request", ("refund", "reject", "review"), 0.001, ("locale",))
PROBS = {"refund": 0.96, "reject": 0.01, "review": 0.03}


def _record(**fields) -> dict:
    base = {"decision": "refund_request", "probabilities": dict(PROBS), "selected": "refund"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


def _write(path: Path, records: list) -> Path:
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in records))
    return path


def _read(path: Path) -> pl.DataFrame:
    return RecordReader(str(path), SPEC).read_all()


# (bad record, expected message). Each is placed on line 2 after a good record, and also
# padded with many good lines so the vectorized path is the one that finds it.
BAD = [
    (_record(decision="x"), "decision 'x' does not match contract decision 'refund_request'"),
    (
        _record(probabilities={"refund": 0.96, "reject": 0.04}),
        "probabilities do not match the contract labels: missing labels ['review']",
    ),
    (
        _record(probabilities={**PROBS, "x": 0.0}),
        "probabilities do not match the contract labels: unknown labels ['x']",
    ),
    (
        _record(probabilities={"refund": 0.96, "reject": 0.01, "review": 0.13}),
        "probabilities sum to 1.1, outside 1 ± 0.001",
    ),
    (_record(probabilities={**PROBS, "refund": True}), "probability of 'refund' must be a number"),
    (
        _record(probabilities={"refund": 1.01, "reject": -0.01, "review": 0.0}),
        "probability of 'reject' must not be negative",
    ),
    (_record(selected="reject"), "selected 'reject' is not the most probable label 'refund'"),
    (_record(confidence=0.9), "confidence 0.9 does not equal the probability of 'refund' (0.96)"),
    (_record(timestamp="2026-09-24T09:00:00"), "timestamp: must include a timezone"),
    (_record(timestamp="yesterday"), "timestamp: must be an ISO 8601 timestamp"),
    (_record(timestamp="0000-09-24T09:00:00Z"), "timestamp: must be an ISO 8601 timestamp"),
    (_record(timestamp="0000-09-24T09:00:00.000+02:00"),
     "timestamp: must be an ISO 8601 timestamp"),
    (
        _record(outcome="refund", outcome_correct=False),
        "outcome_correct False disagrees with selected/outcome",
    ),
    (_record(outcome="x"), "outcome 'x' is not one of the contract labels"),
    (_record(action="fallback", fallback=False), "action 'fallback' conflicts with fallback=false"),
    (_record(action="accept", fallback=True), "fallback=true conflicts with action 'accept'"),
    (_record(action="foo"), "action: must be one of"),
    (_record(id=""), "id: must be a non-empty string"),
    (_record(id=5), "id: must be a string"),
    (_record(zz=5), "zz: unknown field (check the spelling)"),
    (_record(latency_ms=-1), "latency_ms: must be greater than or equal to 0"),
    (_record(latency_ms=True), "latency_ms: must be a number"),
    (_record(metadata={"locale": [1]}), "metadata.locale must be a string, number, boolean"),
    (_record(input=5), "input: must be a string or a JSON object"),
    (_record(selected=...), "selected: required field is missing"),
    (_record(outcome_correct=1), "outcome_correct: must be true or false"),
    ('{"decision": "refund_request", "decision": "refund_request"}\n', "duplicate key"),
    ("[1]\n", "(root): must be a JSON object"),
    ('{"decision":\n', "invalid JSON"),
]


@pytest.mark.parametrize(("bad", "message"), BAD)
@pytest.mark.parametrize("padding", [0, 300])
def test_bad_record_names_file_and_line(tmp_path: Path, bad, message: str, padding: int) -> None:
    good = [_record(id=f"g{i}", metadata={"locale": "en"}) for i in range(padding + 1)]
    path = _write(tmp_path / "records.jsonl", [*good, bad, _record(id="after")])
    with pytest.raises(DatasetError) as error:
        _read(path)
    # a JSON syntax error also names the column of the file's line
    placed = f"{path}: line {padding + 2}, column 13: " if message == "invalid JSON" else \
        f"{path}: line {padding + 2}: "
    assert str(error.value).startswith(placed)
    assert message in str(error.value)


def test_nan_and_infinity_are_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", ['{"decision": "refund_request", "probabilities": '
                                         '{"refund": NaN, "reject": 0, "review": 0}, '
                                         '"selected": "refund"}\n'])
    with pytest.raises(DatasetError, match="line 1: probability of 'refund' must be finite"):
        _read(path)
    path = _write(tmp_path / "c.jsonl", [_record(), '{"decision": "refund_request", '
                  '"probabilities": {"refund": 1, "reject": 0, "review": 0}, '
                  '"selected": "refund", "cost": Infinity}\n'])
    with pytest.raises(DatasetError, match="line 2: invalid production record:\n  cost: must"):
        _read(path)


def _read_strict(path: Path, monkeypatch: pytest.MonkeyPatch) -> pl.DataFrame:
    """The file through the strict per-record parser only (Arrow's path declines)."""
    with monkeypatch.context() as patch:
        patch.setattr(records_module, "_fast_jsonl", lambda *args, **kwargs: None)
        return _read(path)


def test_valid_records_normalize_the_same_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [
        _record(id="a", timestamp="2026-09-24T09:00:00Z", outcome="refund", action="fallback",
                fallback=True, latency_ms=3, cost=0.5, metadata={"locale": "en"}),
        _record(timestamp="2026-09-24T11:00:00+02:00", outcome_correct=False,
                probabilities={"refund": 0.5, "reject": 0.5, "review": 0.0}, confidence=0.5),
        _record(selected="refund", outcome="reject", input={"text": "hi"}),
        # valid; in UTC the instants fall in years 0 and 10000
        _record(timestamp="0001-01-01T00:30:00+01:00"),
        _record(timestamp="9999-12-31T23:30:00-01:00"),
    ]
    path = _write(tmp_path / "records.jsonl", records)
    fast, strict = _read(path), _read_strict(path, monkeypatch)
    columns = [c for c in fast.columns if c != "metadata_json"]
    assert fast.select(columns).equals(strict.select(columns))
    assert fast["id"].to_list() == ["a", "record-2", "record-3", "record-4", "record-5"]
    assert fast["outcome_correct"].to_list() == [True, False, False, None, None]
    assert fast["confidence"].to_list() == [0.96, 0.5, 0.96, 0.96, 0.96]
    assert fast["timestamp"].dt.hour().to_list() == [9, 9, None, 23, 0]
    assert fast["timestamp"].dt.year().to_list() == [2026, 2026, None, 0, 10000]
    assert fast["input_json"][2] == '{"text":"hi"}'


HUGE = "9" * 5000  # past Python's 4,300-digit conversion limit


def test_integers_past_pythons_limit_read_as_arrow_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow reads a 5,000-digit integer as inf: the strict parser does too (it raised
    Python's own conversion error, naming no field), so either path gives one verdict."""
    base = json.dumps(_record(id="a", metadata={"locale": "en"}))
    in_metadata = _write(tmp_path / "m.jsonl", [base.replace('"en"', f'"en", "n": {HUGE}') + "\n"])
    fast, strict = _read(in_metadata), _read_strict(in_metadata, monkeypatch)
    assert fast["id"].to_list() == strict["id"].to_list() == ["a"]
    as_latency = _write(tmp_path / "l.jsonl", [base.replace('"id"', f'"latency_ms": {HUGE}, "id"')
                                               + "\n"])
    for read in (_read, lambda path: _read_strict(path, monkeypatch)):
        with pytest.raises(DatasetError, match="line 1: invalid production record:\n  "
                           "latency_ms: must be a finite number"):
            read(as_latency)


def test_integer_labels_are_converted(tmp_path: Path) -> None:
    spec = RecordSpec("severity", ("1", "2", "3"), 0.001)
    path = _write(tmp_path / "s.jsonl", [
        {"decision": "severity", "probabilities": {"1": 0.2, "2": 0.7, "3": 0.1},
         "selected": 2, "outcome": 3},
    ])
    table = RecordReader(str(path), spec).read_all()
    assert table["selected"].to_list() == ["2"]
    assert table["outcome_correct"].to_list() == [False]


def test_duplicate_ids_within_and_across_partitions(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [_record(id="a"), _record(id="b"), _record(id="a")])
    with pytest.raises(DatasetError, match=r"line 3: duplicate record id 'a' \(first at line 1\)"):
        _read(path)
    # A default id counts too: the 2nd record is `record-2`.
    path = _write(tmp_path / "e.jsonl", [_record(id="record-2"), _record()])
    with pytest.raises(DatasetError, match="line 2: duplicate record id 'record-2'"):
        _read(path)
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder / "1.jsonl", [_record(id="x"), _record(id="y")])
    _write(folder / "2.jsonl", [_record(id="z"), _record(id="y")])
    across = r"2.jsonl: line 2: duplicate record id 'y' \(first at line 2 of .*1.jsonl\)"
    with pytest.raises(DatasetError, match=across):
        _read(folder)


def test_ids_sharing_a_hash_are_not_duplicates(tmp_path: Path, monkeypatch) -> None:
    """Ids are compared exactly wherever their 64-bit hashes repeat: with a hash under
    which most ids collide, distinct ids pass and a repeated one is still found."""
    import decflow.data.records.reader as records

    monkeypatch.setattr(records, "_id_hashes",
                        lambda ids: ids.str.len_bytes().cast(pl.UInt64).to_numpy())
    records_ = [_record(id=f"i{n}") for n in range(30)]
    path = _write(tmp_path / "r.jsonl", records_)
    assert _read(path).height == 30
    _write(path, [*records_, _record(id="i7")])
    with pytest.raises(DatasetError, match=r"line 31: duplicate record id 'i7' "
                                           r"\(first at line 8\)"):
        _read(path)
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder / "1.jsonl", records_[:15])
    _write(folder / "2.jsonl", records_[15:])
    assert _read(folder).height == 30
    _write(folder / "2.jsonl", [*records_[15:], _record(id="i3")])
    with pytest.raises(DatasetError, match=r"2.jsonl: line 16: duplicate record id 'i3'"):
        _read(folder)


def test_default_ids_count_positions_across_partitions(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    _write(folder / "1.jsonl", [_record(), _record()])
    _write(folder / "2.jsonl", [_record()])
    assert _read(folder)["id"].to_list() == ["record-1", "record-2", "record-3"]


def test_json_list_errors_name_the_record(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps([_record(), _record(selected="review")]))
    with pytest.raises(DatasetError, match=r"r.json: record 2: selected 'review' is not"):
        _read(path)


def test_parquet_errors_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame([_record(), _record(selected="reject")]).write_parquet(path)
    with pytest.raises(DatasetError, match=r"r.parquet: row 2: selected 'reject' is not"):
        _read(path)
    naive = tmp_path / "n.parquet"
    pl.DataFrame([_record(timestamp="2026-09-24T09:00:00")]).with_columns(
        pl.col("timestamp").str.to_datetime()
    ).write_parquet(naive)
    with pytest.raises(DatasetError, match="row 1: timestamp: must include a timezone"):
        _read(naive)
    unknown = tmp_path / "u.parquet"
    pl.DataFrame([_record(zz=1)]).write_parquet(unknown)
    with pytest.raises(DatasetError, match=r"unknown column\(s\) \['zz'\]"):
        _read(unknown)


@pytest.mark.parametrize(("instant", "shift", "valid"), [
    ("0001-01-01T00:00:00Z", "0us", True),
    ("9999-12-31T23:59:59.999999Z", "0us", True),
    ("0001-01-01T00:00:00Z", "-1us", False),  # year 0
    ("9999-12-31T23:59:59.999999Z", "1us", False),  # year 10000
])
def test_parquet_typed_timestamps_hold_years_1_to_9999(tmp_path: Path, instant: str,
                                                       shift: str, valid: bool) -> None:
    path = tmp_path / "t.parquet"
    stamps = pl.Series(["2026-09-24T09:00:00Z", instant]).str.to_datetime(
        time_unit="us", time_zone="UTC").dt.offset_by(shift)
    pl.DataFrame([_record(id="a"), _record(id="b")]).with_columns(
        timestamp=stamps).write_parquet(path)
    if valid:
        assert _read(path)["timestamp"][1] == stamps[1]
    else:
        with pytest.raises(DatasetError, match=r"t.parquet: row 2: (.|\n)*timestamp: must be"):
            _read(path)


def test_parquet_iso_string_timestamps_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame([
        {**_record(), "timestamp": "2026-09-24T09:00:00Z", "metadata_json": '{"locale": 1}'},
        {**_record(), "timestamp": None, "metadata_json": '{"locale": "1"}'},
        {**_record(), "timestamp": None, "metadata_json": None},
    ]).write_parquet(path)
    table = _read(path)
    assert table["segment:locale"].to_list() == ["int:1", "str:'1'", "NoneType:"]


def test_sources(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        list_partitions(str(tmp_path / "missing.jsonl"))
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(DatasetError, match=r"unsupported record file type '\.csv'"):
        list_partitions(str(tmp_path / "x.csv"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match=r"no \.jsonl, \.json or \.parquet files"):
        list_partitions(str(empty))


def test_chunked_jsonl_keeps_line_numbers(tmp_path: Path, monkeypatch) -> None:
    import decflow.data.records.reader as records

    good = [_record(id=f"g{i}", metadata={"locale": "en"}) for i in range(40)]
    path = _write(tmp_path / "r.jsonl", good)
    whole = _read(path)
    monkeypatch.setattr(records, "JSONL_CHUNK_BYTES", 500)
    assert _read(path).equals(whole)
    _write(path, [*good, _record(id="bad", selected="review"), _record(id="g3")])
    with pytest.raises(DatasetError, match=r"line 41: selected 'review' is not"):
        _read(path)
    _write(path, [*good, "\n", _record(id="g3")])
    duplicate = r"line 42: duplicate record id 'g3' \(first at line 4\)"
    with pytest.raises(DatasetError, match=duplicate):
        _read(path)


def test_first_problem_in_file_order_wins_across_chunks(tmp_path: Path, monkeypatch) -> None:
    import decflow.data.records.reader as records

    monkeypatch.setattr(records, "JSONL_CHUNK_BYTES", 500)
    good = [_record(id=f"g{i}") for i in range(40)]
    bad = _record(id="bad", selected="review")
    # The duplicate and the invalid record are in different chunks.
    path = _write(tmp_path / "r.jsonl", [*good, _record(id="g1"), *[
        _record(id=f"h{i}") for i in range(20)], bad])
    with pytest.raises(DatasetError, match=r"line 41: duplicate record id 'g1'"):
        _read(path)
    _write(path, [*good, bad, _record(id="g1")])
    with pytest.raises(DatasetError, match=r"line 41: selected 'review'"):
        _read(path)


@pytest.mark.parametrize("padding", [0, 300])
def test_tolerance_edge_uses_the_exact_sum(tmp_path: Path, padding: int) -> None:
    good = [_record(id=f"g{i}") for i in range(padding)]
    # fsum of (0.501, 0.25, 0.25) is 1.0009999999999999, inside 1 ± 0.001;
    # 0.5010000000000001 pushes the exact sum just outside.
    inside = _record(probabilities={"refund": 0.501, "reject": 0.25, "review": 0.25})
    assert _read(_write(tmp_path / "in.jsonl", [*good, inside])).height == padding + 1
    outside = _record(probabilities={"refund": 0.5010000000000001, "reject": 0.25,
                                     "review": 0.25})
    with pytest.raises(DatasetError, match=f"line {padding + 1}: probabilities sum to 1.001"):
        _read(_write(tmp_path / "out.jsonl", [*good, outside]))


TIMESTAMPS = [
    "2026-09-24T09:00:00Z", "2026-09-24T09:00:00.123Z", "2026-09-24T09:00:00.123456+02:00",
    "2026-09-24T09:00:00-05:30", "2026-09-24 09:00:00+00:00", "2026-09-24T09:00+01:00",
    "2026-1-5T09:00:00Z", "2026-09-24T9:00:00Z", " 2026-09-24T09:00:00Z",
    "2026-09-24T09:00:60Z", "2026-02-30T09:00:00Z", "2026-09-24T09:00:00z",
    "2026-09-24T09:00:00", "2026-09-24", "20260924T090000Z", "yesterday",
]


@pytest.mark.parametrize("text", TIMESTAMPS)
def test_timestamps_follow_python_fromisoformat(tmp_path: Path, text: str) -> None:
    from datetime import datetime

    try:
        expected = datetime.fromisoformat(text)
    except ValueError:
        expected = None
    if expected is not None and expected.tzinfo is None:
        expected = None
    padding = [_record(id=f"g{i}", timestamp="2026-09-24T09:00:00Z") for i in range(300)]
    path = _write(tmp_path / "t.jsonl", [*padding, _record(timestamp=text)])
    if expected is None:
        with pytest.raises(DatasetError, match="line 301: invalid production record:\n  "
                                               "timestamp: must"):
            _read(path)
    else:
        assert _read(path)["timestamp"][-1] == expected


@pytest.mark.parametrize("chunk_bytes", [500, 16 << 20])
def test_duplicate_before_a_bad_line_in_the_same_chunk_wins(
    tmp_path: Path, monkeypatch, chunk_bytes: int
) -> None:
    import decflow.data.records.reader as records

    monkeypatch.setattr(records, "JSONL_CHUNK_BYTES", chunk_bytes)
    good = [_record(id=f"g{i}") for i in range(40)]
    bad = _record(id="bad", selected="review")
    # g39 repeats g39 of the same chunk (small chunks: of an earlier chunk too)
    path = _write(tmp_path / "r.jsonl", [*good, _record(id="g39"), bad])
    with pytest.raises(DatasetError, match=r"line 41: duplicate record id 'g39' "
                                           r"\(first at line 40\)"):
        _read(path)
    path = _write(tmp_path / "s.jsonl", [*good, _record(id="g0"), bad])
    with pytest.raises(DatasetError, match=r"line 41: duplicate record id 'g0' "
                                           r"\(first at line 1\)"):
        _read(path)


@pytest.mark.parametrize("padding", [0, 300])
def test_segment_values_are_judged_after_every_record(tmp_path: Path, padding: int) -> None:
    # As DecGuard: record rules first (any line), then segment values.
    good = [_record(id=f"g{i}") for i in range(padding)]
    unusable = _record(id="m", metadata={"locale": {"a": 1}})
    path = _write(tmp_path / "r.jsonl", [*good, unusable, _record(selected="review")])
    with pytest.raises(DatasetError, match=f"line {padding + 2}: selected 'review'"):
        _read(path)
    _write(path, [*good, unusable, _record(metadata={"locale": float("nan")})])
    with pytest.raises(DatasetError, match=f"line {padding + 1}: record 'm': metadata.locale "
                                           "must be a string, number, boolean or null"):
        _read(path)


def _line(**fields) -> bytes:
    return json.dumps(_record(**fields), ensure_ascii=False).encode()


BAD_BYTES = [
    (_line(id="a") + b"\n" + _line(input="café").replace("é".encode(), b"\xe9") + b"\n",
     r"line 2: input: byte \d+ is not valid UTF-8"),
    (b"\xef\xbb\xbf" + _line() + b"\n", "line 1: the file starts with a UTF-8 byte-order mark"),
    (_line(input="ab").replace(b'"ab"', b'"a\x00b"') + b"\n",
     r"line 1: input: byte \d+ holds a NUL"),
    (_line()[:-1] + b', "latency_ms": 1' + b"0" * 400 + b"}\n",
     "line 1: invalid production record:\n  latency_ms: must be a finite number"),
    (_line(probabilities={"refund": 1, "reject": 0, "review": 0}).replace(
        b'"refund": 1,', b'"refund": 1' + b"0" * 400 + b","),
     "line 1: probability of 'refund' must be finite"),
    (_line()[:-1] + b', "metadata": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n",
     "line 1: invalid JSON: metadata: nested too deeply"),
    (_line()[:-1] + b', "cost": -Infinity}\n', "line 1: invalid production record:\n  cost: must"),
    (_line()[:-1] + b', "selected": "refund"}\n', "line 1: invalid JSON: duplicate key 'selected'"),
]


@pytest.mark.parametrize(("data", "message"), BAD_BYTES)
@pytest.mark.parametrize("padding", [0, 300])
def test_bad_bytes_are_exit_2_naming_line_and_field(
    tmp_path: Path, data: bytes, message: str, padding: int
) -> None:
    good = b"".join(_line(id=f"g{i}") + b"\n" for i in range(padding))
    path = tmp_path / "r.jsonl"
    path.write_bytes(good + data)
    if padding and data.startswith(b"\xef\xbb\xbf"):
        message = f"line {padding + 1}, column 1: invalid JSON: Unexpected UTF-8 BOM"
    elif padding:
        message = message.replace("line 2:", f"line {padding + 2}:").replace(
            "line 1:", f"line {padding + 1}:")
    with pytest.raises(DatasetError, match=message):
        _read(path)


@pytest.mark.parametrize("first", [b"null", b" null", b"true", b"1", b'"x"', b"[]"])
def test_a_chunk_opening_with_a_value_other_than_an_object_is_exit_2(
    tmp_path: Path, monkeypatch, first: bytes
) -> None:
    """Arrow's reader crashed the process on a `null` first row: as the file's first line,
    and as the first line of a later chunk."""
    import decflow.data.records.reader as records

    path = tmp_path / "r.jsonl"
    path.write_bytes(first + b"\n" + _line() + b"\n")
    with pytest.raises(DatasetError, match=r"line 1: invalid production record:\n  \(root\): "
                                           "must be a JSON object"):
        _read(path)
    monkeypatch.setattr(records, "JSONL_CHUNK_BYTES", 2000)
    good = b"".join(_line(id=f"g{i}") + b"\n" for i in range(40))
    later = len(good[:2000].split(b"\n")) + 1  # the second chunk's first line
    lines = good.split(b"\n")
    path.write_bytes(b"\n".join([*lines[: later - 1], first, *lines[later - 1 :]]))
    with pytest.raises(DatasetError, match=f"line {later}: invalid production record"):
        _read(path)


def test_line_stats_across_slices(monkeypatch) -> None:
    """Lines, the longest line and the lines opening with `{`, whatever the slices."""
    import random

    import decflow.data.records.blocks as record_blocks

    monkeypatch.setattr(record_blocks, "_SLICE", 7)
    record_blocks._SCRATCH.__dict__.clear()  # a scratch array of the patched size
    rng = random.Random(3)
    for _ in range(300):
        block = bytes(rng.choice(b"{a \n") for _ in range(rng.randrange(0, 60)))
        lines = block.split(b"\n")
        if block.endswith(b"\n") or not block:
            lines = lines[:-1]
        stats = record_blocks.line_stats(bytearray(block))
        assert stats.lines == len(lines), block
        assert stats.longest == max((len(line) for line in block.split(b"\n")), default=0)
        assert stats.opening == sum(line.startswith(b"{") for line in lines), block
    record_blocks._SCRATCH.__dict__.clear()


def test_blank_lines_never_let_a_line_hold_two_records(tmp_path: Path) -> None:
    """Arrow skips blank lines and reads a line holding two objects as two rows: with one
    of each in a chunk, the counts agreed and the two objects passed as two records."""
    lines = [json.dumps(_record(id=f"g{i}")) for i in range(300)]
    lines[150] = ""
    lines[200] += json.dumps(_record(id="extra"))
    path = _write(tmp_path / "r.jsonl", ["\n".join(lines) + "\n"])
    column = len(json.dumps(_record(id="g200"))) + 1  # where the second object starts
    with pytest.raises(DatasetError, match=f"line 201, column {column}: invalid JSON: Extra "
                       "data"):
        _read(path)


@pytest.mark.parametrize("blank", ["", "   ", "\t\r"])
def test_blank_and_indented_lines_keep_their_line_numbers(tmp_path: Path, blank: str) -> None:
    lines = [json.dumps(_record(id=f"g{i}")) for i in range(300)]
    lines[10] = blank
    lines[20] = "  " + lines[20]
    lines[250] = json.dumps(_record(id="bad", selected="review"))
    path = _write(tmp_path / "r.jsonl", ["\n".join(lines) + "\n\n"])
    with pytest.raises(DatasetError, match="line 251: selected 'review' is not the most"):
        _read(path)
    lines[250] = json.dumps(_record(id="g250"))
    _write(path, ["\n".join(lines) + "\n\n"])
    table = _read(path)
    assert table.height == 299 and table["id"][10] == "g11"
    from decflow.data.records.units import plan_source

    assert sum(unit.n_records for unit in plan_source(str(path)).units) == 299


def test_short_unbalanced_lines_never_reach_arrow_as_one_deep_value(tmp_path: Path) -> None:
    """Arrow parses each line apart: many short lines that never close their brackets
    are invalid lines, not one value nested thousands deep (which would crash it)."""
    good = b"".join(_line(id=f"g{i}") + b"\n" for i in range(300))
    path = tmp_path / "r.jsonl"
    path.write_bytes(good + b'{"a": ' + (b"[" * 100 + b"\n") * 2000)
    with pytest.raises(DatasetError, match="line 301, column 107: invalid JSON"):
        _read(path)


def test_a_very_long_line_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_record(input="x" * (40 << 20)), _record(id="b")])
    assert _read(path).height == 2


def test_invalid_utf8_in_a_parquet_string_column_is_exit_2(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = b"ab" + "café".encode("latin-1")
    offsets = pa.py_buffer(b"".join(n.to_bytes(4, "little") for n in (0, 2, len(data))))
    latin1 = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(data)])
    table = pa.table({
        "decision": ["refund_request"] * 2, "probabilities": [PROBS] * 2,
        "selected": ["refund"] * 2, "input": latin1,
    })
    pq.write_table(table, tmp_path / "r.parquet")
    with pytest.raises(DatasetError, match=r"r.parquet: row 1: unreadable Parquet data .*UTF-8"):
        _read(tmp_path / "r.parquet")
