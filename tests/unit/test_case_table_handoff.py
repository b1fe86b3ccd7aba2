"""What the first stages hand each other in the run's context: the cases stage loads the
bytes its key was made of; the requests stage takes the case table the cases stage left,
and reads the store when the table is not the published one (or was never left); the call
stage takes the requests' first part the requests stage left, once."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl

from decflow.data.case_table import CASES_SCHEMA
from decflow.data.golden_dataset import load_golden, read_dataset
from decflow.pipeline.contract_run import inputs
from decflow.pipeline.contract_run.results import RequestParts
from decflow.pipeline.schemas import REQUESTS_SCHEMA
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


def requests(ids: list[str], properties: list[str]) -> pl.DataFrame:
    n = len(ids)
    columns: dict[str, Any] = {name: [None] * n for name in REQUESTS_SCHEMA}
    columns.update(request_id=ids, case_id=ids, property=properties, sample=[0] * n,
                   input_text=ids, shown_labels=[["x", "y"]] * n, label_order=[[0, 1]] * n)
    return pl.DataFrame(columns, schema=REQUESTS_SCHEMA)


class CountingStore(Store):
    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read_part(self, part: Any, columns: Any = None) -> pl.DataFrame:
        self.reads.append(part.path)
        return super().read_part(part, columns)


def test_the_requests_part_left_by_the_requests_stage_is_used_once(tmp_path: Path) -> None:
    store = CountingStore(str(tmp_path))
    table = requests(["a", "b", "a~p"], ["", "", "p"])
    manifest = store.publish("requests", "k1", table)
    parts = RequestParts(store, manifest, (manifest.parts[0].sha256, table))
    assert parts.phase_count("originals") == 2 and parts.phase_count("transformed") == 1
    first = parts.rows("originals", 0, 2)
    assert store.reads == []  # no read back before the first call
    assert parts.rows("transformed", 0, 1)["request_id"].to_list() == ["a~p"]
    assert len(store.reads) == 1  # used once, then read as any other part
    unhanded = RequestParts(Store(str(tmp_path)), manifest)
    assert first.equals(unhanded.rows("originals", 0, 2))


def test_a_requests_part_left_for_another_artifact_is_not_used(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    stored = store.publish("requests", "k1", requests(["a"], [""]))
    other = requests(["z"], [""])
    handed = (store.publish("requests", "k2", other).parts[0].sha256, other)
    assert RequestParts(store, stored, handed).rows("originals", 0, 1)[
        "request_id"].to_list() == ["a"]
