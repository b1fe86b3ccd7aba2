"""Fuzz runs end to end against DecGuard 0.1.1's own summaries and transformed cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.compare import close
from tests.support.paths import REFERENCE

EXAMPLES = REFERENCE / "decguard-examples"
VECTORS = REFERENCE / "decguard-vectors"

RUNS = [
    ("refund-default-seed42", "refund", "summaries-refund-default-seed42.json", ()),
    ("refund-order_sensitive-seed42", "refund", "summaries-refund-order_sensitive-seed42.json",
     ("-b", "order_sensitive")),
    ("severity-seed0", "severity", "summaries-severity-seed0.json", ()),
    ("spam-seed0", "spam", "summaries-spam-seed0.json", ()),
]


def fuzz(tmp_path: Path, example: str, *args: str) -> dict:
    contract = EXAMPLES / example / ("decguard.yaml")
    out = tmp_path / "fuzz.json"
    code, _, err = run_cli("fuzz", str(contract), "--store", str(tmp_path / "s"), "-o", str(out),
                           *args)
    report = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return report


@pytest.mark.parametrize(("run", "example", "vector", "args"), RUNS)
def test_fuzz_summaries_equal_reference(tmp_path, run, example, vector, args):
    expected = json.loads((VECTORS / vector).read_text())
    report = fuzz(tmp_path, example, *args)
    section = report["properties"]
    assert section["seed"] == expected["seed"]
    for mine, ref in zip(section["summaries"], expected["summaries"], strict=True):
        extra = {k: v for k, v in mine.items() if k not in ref}
        assert set(extra) <= {"rerun_evidence"}
        assert close({k: v for k, v in mine.items() if k in ref}, ref), mine["property"]
    assert section["skipped"] == expected["skipped"]
    assert report["checks"] == expected["checks"]
    assert (report["status"], report["exit_code"]) == (expected["status"], expected["exit_code"])


@pytest.mark.parametrize(("run", "example", "vector", "args"), RUNS)
def test_transformed_cases_equal_reference(tmp_path, run, example, vector, args):
    rows = [
        json.loads(line) for line in (VECTORS / "transformations.jsonl").read_text().splitlines()
        if json.loads(line)["run"] == run
    ]
    report = fuzz(tmp_path, example, *args)
    store = Path(tmp_path / "s")
    import polars as pl

    requests_path = report["run"]["artifacts"]["requests"]["path"]
    requests = pl.read_parquet(store / requests_path / "part-00000.parquet")
    transformed = {r["request_id"]: r for r in requests.iter_rows(named=True) if r["property"]}
    assert set(transformed) == {r["id"] for r in rows}
    labels = report["contract"]["labels"]
    for ref in rows:
        mine = transformed[ref["id"]]
        assert json.loads(mine["steps_json"]) == ref["steps"]
        value = mine["input_text"] if mine["input_text"] is not None else json.loads(
            mine["input_json"]
        )
        assert value == ref["input"]
        canonical = mine["shown_labels"] == labels and mine["label_order"] == list(
            range(len(labels))
        )
        shown = None if canonical else [
            [s, labels[i]] for s, i in zip(mine["shown_labels"], mine["label_order"], strict=True)
        ]
        assert shown == ref["presentation"]
    failures = {f["id"]: f for f in report["properties"]["failures"]}
    for ref in rows:
        if ref["violations"]:
            assert failures[ref["id"]]["violations"] == ref["violations"]
            reduced = failures[ref["id"]]["reduced"]
            assert (reduced["steps"] if reduced else None) == ref["reduced_steps"]


def test_regate_fuzz_with_relaxed_limit(tmp_path):
    """The reference: the order-sensitive fuzz report re-gated with max_tv_distance 0.2 passes."""
    import shutil

    import yaml

    fuzz(tmp_path, "refund", "-b", "order_sensitive")
    folder = tmp_path / "edited"
    shutil.copytree(EXAMPLES / "refund", folder)
    path = folder / "decguard.yaml"
    data = yaml.safe_load(path.read_text())
    data["properties"]["option_order"]["max_tv_distance"] = 0.2
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run_id = next((tmp_path / "s" / "runs").iterdir()).name
    code, out, err = run_cli("report", run_id, "-c", str(path), "--store", str(tmp_path / "s"))
    assert code == 0, err
    assert "PASS" in out.splitlines()[0]


def test_property_not_in_stored_run_fails_when_regated(tmp_path):
    import shutil

    import yaml

    fuzz(tmp_path, "spam")
    folder = tmp_path / "edited"
    shutil.copytree(EXAMPLES / "spam", folder)
    path = folder / "decguard.yaml"
    data = yaml.safe_load(path.read_text())
    data["properties"]["whitespace"] = {"max_tv_distance": 0.02}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run_id = next((tmp_path / "s" / "runs").iterdir()).name
    out = tmp_path / "regated.json"
    code, _, _ = run_cli("report", run_id, "-c", str(path), "--store", str(tmp_path / "s"),
                         "-o", str(out))
    regated = json.loads(out.read_text())
    check = next(c for c in regated["checks"] if c["gate"] == "whitespace.max_error_rate")
    assert check["status"] == "fail"
    assert "the property was not run" in check["message"]
    assert code == 1


def test_untransformable_cases_are_skipped_and_a_property_that_changes_nothing_fails(tmp_path):
    import shutil

    import yaml

    folder = tmp_path / "spam"
    shutil.copytree(EXAMPLES / "spam", folder)
    path = folder / "decguard.yaml"
    data = yaml.safe_load(path.read_text())
    data["properties"] = {
        "normalization": {"max_tv_distance": 0.02},  # plain ASCII, single spaces: no change
        "inversion": {"rewrites": [{"find": "winner", "replace": "loser"}],
                      "max_tv_distance": 1.0},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "fuzz.json"
    code, text, err = run_cli("fuzz", str(path), "--store", str(tmp_path / "s"), "-o", str(out))
    report = json.loads(out.read_text())
    skipped = report["properties"]["skipped"]
    reasons = {(s["property"], s["reason"]) for s in skipped}
    assert ("normalization", "no transformation changes this case") in reasons
    assert ("inversion", "no rewrite matches the text") in reasons
    assert sum(s["property"] == "normalization" for s in skipped) == 10
    inverted = [s for s in report["properties"]["summaries"] if s["property"] == "inversion"]
    assert inverted and inverted[0]["n_transformed"] == 1  # only "Congratulations winner, …"
    check = next(c for c in report["checks"] if c["gate"] == "normalization.max_error_rate")
    assert check["status"] == "fail"
    assert "no case could be transformed" in check["message"]
    assert code == 1, err
    assert "normalization/case-1: no transformation changes this case" in text
