"""Golden datasets: DecGuard's JSONL/JSON rules, plus Parquet and CSV with the same checks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from decflow.data.golden_dataset import load_golden
from decflow.errors import DatasetError
from tests.support.paths import EXAMPLES

LABELS = ("refund", "reject", "review")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reference_example_hash_and_counts():
    path = EXAMPLES / "refund" / "cases.jsonl"
    data = load_golden(path, LABELS)
    vector = json.loads(
        (EXAMPLES.parent / "decguard-vectors" / "golden-refund-test-default.json").read_text()
    )
    assert data.hash == vector["dataset"]["hash"]
    assert (data.n_cases, data.n_labeled) == (11, 10)


def test_missing_ids_count_non_blank_rows(tmp_path: Path):
    path = write(tmp_path, "d.jsonl", '\n{"input": "a"}\n   \n{"input": "b", "id": "x"}\n'
                 '{"input": "c"}\n')
    data = load_golden(path, LABELS)
    assert data.cases["case_id"].to_list() == ["case-1", "x", "case-3"]


def test_integer_expected_becomes_a_level(tmp_path: Path):
    path = write(tmp_path, "d.jsonl", '{"input": {"text": "t"}, "expected": 4}\n')
    data = load_golden(path, ("1", "2", "3", "4"))
    assert data.cases["expected"].to_list() == ["4"]
    assert data.cases["input_json"].to_list() == ['{"text":"t"}']


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"input": "a"}\n{"input": }\n',
         "line 2, column 11: invalid JSON: input: Expecting value"),
        ('{"input": "a", "expectd": "refund"}\n', "line 1: unknown field 'expectd'"),
        ('{"expected": "refund"}\n', "line 1: missing required field 'input'"),
        ('{"input": "a", "expected": "nope"}\n', "line 1: unknown label 'nope'"),
        ('{"input": "a", "id": "a"}\n\n{"input": "b", "id": "a"}\n',
         "line 3: duplicate case id 'a' (first at line 1)"),
        ('{"input": ["a"]}\n', "line 1: input must be a string or a JSON object"),
        ('{"input": "a", "id": 7}\n', "line 1: id must be a non-empty string"),
        ('{"input": "a", "expected": true}\n', "line 1: expected True is not a label"),
        ('{"input": "a", "input": "b"}\n',
         "line 1, column 16: invalid JSON: input: duplicate key (first defined on line 1)"),
        ("\n  \n", "dataset contains no cases"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, "bad.jsonl", text)
    with pytest.raises(DatasetError) as found:
        load_golden(path, LABELS)
    assert str(found.value).startswith(f"{path}: ")
    assert message in str(found.value)


def test_json_list_errors_name_the_case(tmp_path: Path):
    path = write(tmp_path, "bad.json", '[{"input": "a"}, {"input": "b", "metadata": 3}]')
    with pytest.raises(DatasetError, match=r"case 2 \(line 1\): metadata must be a JSON object"):
        load_golden(path, LABELS)


def test_unsupported_suffix(tmp_path: Path):
    with pytest.raises(DatasetError, match="unsupported dataset format"):
        load_golden(write(tmp_path, "d.txt", "x"), LABELS)


def test_parquet_and_csv_equal_jsonl(tmp_path: Path):
    source = EXAMPLES / "refund" / "cases.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    table = pl.DataFrame(
        {
            "id": [r["id"] for r in rows],
            "input": [r["input"] for r in rows],
            "expected": [r.get("expected") for r in rows],
            "metadata_json": [json.dumps(r["metadata"]) for r in rows],
        }
    )
    table.write_parquet(tmp_path / "d.parquet")
    table.write_csv(tmp_path / "d.csv")
    reference = load_golden(source, LABELS).cases
    for name in ("d.parquet", "d.csv"):
        data = load_golden(tmp_path / name, LABELS)
        assert data.cases.equals(reference)
        assert data.hash == "sha256:" + hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()


def test_table_errors_name_the_row(tmp_path: Path):
    pl.DataFrame({"input": ["a", "b"], "expected": ["refund", "bogus"]}).write_csv(
        tmp_path / "d.csv"
    )
    with pytest.raises(DatasetError, match=r"d\.csv: row 2: unknown label 'bogus'"):
        load_golden(tmp_path / "d.csv", LABELS)
    pl.DataFrame({"input_json": ['{"text": 1}', "[1]"]}).write_parquet(tmp_path / "o.parquet")
    with pytest.raises(DatasetError, match="row 2: input_json must be a JSON object"):
        load_golden(tmp_path / "o.parquet", LABELS)
    pl.DataFrame({"text": ["a"]}).write_parquet(tmp_path / "u.parquet")
    with pytest.raises(DatasetError, match="unknown column 'text'"):
        load_golden(tmp_path / "u.parquet", LABELS)
