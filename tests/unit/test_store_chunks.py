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
