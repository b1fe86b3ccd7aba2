"""A report's per-case lists written by the fast encoder are the bytes the json module
writes, whatever they hold; and a NaN in stored metadata still stops the report."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from decflow.pipeline.contract_run.golden_section import _json_objects
from decflow.store.store import json_bytes

PER_CASE = ("results", "failures")


def _case(**fields: object) -> dict[str, object]:
    return {"case_id": "c1", "input": "é “quoted” \u2028 \x01 tab\t", "expected": None,
            "result": {"probabilities": {"a": 0.7, "b": 0.3}, "latency_ms": 12.5}, **fields}


@pytest.mark.parametrize("value", [
    0.25,  # written by orjson
    1e-05, -7.5e-07, 5e-324,  # floats orjson spells otherwise: the json module writes them
    1.5e16, 1e22, -0.0, 2**63 - 1,
    2**70,  # beyond 64 bits: orjson refuses it
    np.float64(0.5),  # a numpy scalar: orjson refuses it
    {1: "int key"},  # a key that is not a string: orjson refuses it
    "1e-5 in a string", "version 0.00001",
])
def test_per_case_lists_are_written_as_the_json_module_writes_them(value: object) -> None:
    report = {"report_version": "decflow/4", "metrics": {"ece": 1e-05},
              "results": [_case(metadata={"v": value}) for _ in range(3)],
              "failures": [_case(v=value)], "checks": [{"value": value}]}
    plain = json_bytes(report)
    assert json_bytes(report, per_case=PER_CASE) == plain
    assert plain == (json.dumps(report, ensure_ascii=False, allow_nan=False,
                                separators=(",", ":")) + "\n").encode()


def test_non_finite_numbers_outside_per_case_lists_are_still_refused() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        json_bytes({"metrics": {"ece": float("nan")}, "results": []}, per_case=PER_CASE)


def test_a_lone_surrogate_in_a_per_case_list_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        json_bytes({"results": [{"input": "\ud800"}]}, per_case=PER_CASE)


def test_stored_metadata_is_decoded_per_case_and_nan_refused() -> None:
    texts = [None, "{}", '{"locale":"de"}', '{"n":[1,2.5e-05]}', "{}"]
    assert _json_objects(pl.Series(texts, dtype=pl.String)) == [
        {}, {}, {"locale": "de"}, {"n": [1, 2.5e-05]}, {}]
    assert _json_objects(pl.Series([None] * 3, dtype=pl.String)) == [{}, {}, {}]
    assert _json_objects(pl.Series(["", '{"a":1}'], dtype=pl.String)) == [{}, {"a": 1}]
    with pytest.raises(ValueError, match="not JSON compliant: NaN"):
        _json_objects(pl.Series(['{"score":NaN}']))


def test_larger_numbers_with_zeros_after_the_point_keep_the_fast_writer() -> None:
    from decflow.store.store import _small_float_spelled

    assert not _small_float_spelled(b'[{"latency_ms":20.000031,"n":100.00001}]')
    assert _small_float_spelled(b'[{"p":0.00001}]')
    assert _small_float_spelled(b'[-0.000012]')
    assert _small_float_spelled(b'[1e-7]')
    assert not _small_float_spelled(b'["one-sided","e-mail"]')


def test_a_report_written_in_pieces_is_the_json_module_s_bytes_and_hash(
        tmp_path: Path) -> None:
    from decflow.store.run_files import digest
    from decflow.store.runs import write_report
    from decflow.store.store import open_store

    store = open_store(str(tmp_path / "store"))
    report = {"report_version": "decflow/4", "results": [_case(metadata={"v": 0.5})] * 3,
              "failures": [], "checks": [{"value": 1e-05}]}
    path = write_report(store, "run-1", report, per_case=PER_CASE, plain=True)
    written = (tmp_path / "store" / path).read_bytes()
    assert written == (json.dumps(report, ensure_ascii=False, allow_nan=False,
                                  separators=(",", ":")) + "\n").encode()
    assert digest([written[:10], written[10:]]) == "sha256:" + hashlib.sha256(written).hexdigest()
