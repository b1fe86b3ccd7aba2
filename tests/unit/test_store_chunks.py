"""A stage's chunk files are listed with their request ids: those this process wrote come
from what it kept when writing them (not read back), the others from the files."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from decflow.store.store import Part, open_store


def test_chunks_written_here_are_not_read_back(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    prefix = store.stage_prefix("results", "k1")
    earlier = store.write_part(f"{prefix}/chunk-o000000-aaaa-00000.parquet",
                               pl.DataFrame({"request_id": ["c1", "c2"], "x": [1, 2]}))
    here = store.write_part(f"{prefix}/chunk-o000000-bbbb-00000.parquet",
                            pl.DataFrame({"request_id": ["c3"], "x": [3]}))
    store.write_bytes(f"{prefix}/notes.txt", b"not a chunk")
    # what this process kept of its chunk; a marker sha256 shows it was not read again
    kept = (Part(here.path, "kept-when-written", 1), pl.Series("request_id", ["c3"]))
    found = store.chunk_ids("results", "k1", {here.path: kept})
    assert [(part, ids.to_list()) for part, ids in found] == [
        (earlier, ["c1", "c2"]), (kept[0], ["c3"])]
    assert [(part, ids.to_list()) for part, ids in store.chunk_ids("results", "k1")] == [
        (earlier, ["c1", "c2"]), (here, ["c3"])]


def test_parts_this_process_holds_are_not_read_back(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    first = pl.DataFrame({"request_id": ["c1", "c2"], "x": [1, 2]})
    second = pl.DataFrame({"request_id": ["c3"], "x": [3]})
    manifest = store.publish("results", "k1", [first, second])
    one, two = manifest.parts
    # held frames differ from the files' rows: what is read shows where it came from
    held = {one.path: (one.sha256, pl.DataFrame({"request_id": ["h1"], "x": [10]})),
            two.path: ("another sha256", pl.DataFrame({"request_id": ["h3"], "x": [30]}))}
    assert store.read(manifest, held=held).to_dicts() == [
        {"request_id": "h1", "x": 10}, {"request_id": "c3", "x": 3}]
    assert store.read(manifest, ["x"], held=held).columns == ["x"]
    assert store.read(manifest, where=pl.col("x") > 5, held=held)["x"].to_list() == [10]
    assert store.read(manifest)["request_id"].to_list() == ["c1", "c2", "c3"]
