"""What the first stages hand each other in the run's context: the cases stage loads the
bytes its key was made of; the requests stage takes the case table the cases stage left,
and reads the store when the table is not the published one (or was never left)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl

from decflow.data.case_table import CASES_SCHEMA
from decflow.data.golden_dataset import load_golden, read_dataset
from decflow.pipeline.contract_run import inputs
from decflow.pipeline.stage import StageContext
from decflow.store.store import Store


def cases(ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"case_id": ids, "input_text": ids, "input_json": [None] * len(ids),
                         "expected": [None] * len(ids), "metadata_json": ["{}"] * len(ids),
                         "position": range(1, len(ids) + 1)}, schema=CASES_SCHEMA)


def context(store: Store, manifests: dict[str, Any]) -> StageContext[Any]:
    return StageContext(spec=None, store=store, loaded=None, manifests=manifests)


def test_the_table_left_by_the_cases_stage_is_used_once(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    table = cases(["a", "b"])
    manifest = store.publish("cases", "k1", table)
    run = context(store, {"cases": manifest})
    run.outputs[inputs._CASE_TABLE] = (manifest.sha256, table)
    assert inputs._case_table(run) is table
    assert inputs._CASE_TABLE not in run.outputs
    again = inputs._case_table(run)
    assert again is not table and again.equals(table)


def test_a_table_left_for_another_artifact_is_not_used(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    stored = store.publish("cases", "k1", cases(["a"]))
    other = cases(["z"])
    run = context(store, {"cases": stored})
    run.outputs[inputs._CASE_TABLE] = (store.publish("cases", "k2", other).sha256, other)
    assert inputs._case_table(run)["case_id"].to_list() == ["a"]


def test_the_cases_stage_loads_the_bytes_its_key_was_made_of(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "first", "input": "a"}\n')
    read = read_dataset(path)
    path.write_text('{"id": "changed", "input": "b"}\n')  # after the key was made
    loaded = load_golden(path, ("x",), read=read)
    assert loaded.cases["case_id"].to_list() == ["first"]
    assert loaded.hash == read[1] == "sha256:" + hashlib.sha256(read[0]).hexdigest()
    assert load_golden(path, ("x",)).cases["case_id"].to_list() == ["changed"]
