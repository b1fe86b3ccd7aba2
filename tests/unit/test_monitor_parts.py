"""The parts a monitor is made of, each against an independent computation: stable id
hashes (a plain-Python reference), windows of timestamps, partition listings that never
open a file, correctness learnt from labels (equal to the records' own statistics with
their outcomes inline), reading labels, joining them, and how a listing compares with
what a monitor read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from decflow.data.records.id_hashes import stable_id_hashes
from decflow.data.records.reader import RecordReader, RecordSpec
from decflow.data.records.units import partition_files
from decflow.data.records.windows import window_of, window_start
from decflow.errors import DatasetError
from decflow.metrics.production import correctness_stats, merge_groups, stats_frame
from decflow.pipeline.monitor.labels import join_labels, read_labels
from decflow.pipeline.monitor.state import Seen, changes
from decflow.pipeline.production.statistics import BatchStats

LABELS = ("refund", "reject", "review")
MASK = (1 << 64) - 1


def _reference_hash(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for at in range(0, len(data), 8):
        word = int.from_bytes(data[at:at + 8].ljust(8, b"\0"), "little")
        value = ((value ^ word) * 0x100000001B3) & MASK
    value = ((value ^ len(data)) * 0x100000001B3) & MASK
    value ^= value >> 30
    value = (value * 0xBF58476D1CE4E5B9) & MASK
    value ^= value >> 27
    value = (value * 0x94D049BB133111EB) & MASK
    return value ^ (value >> 31)


def test_id_hashes_equal_a_plain_python_reference() -> None:
    ids = ["", "a", "12345678", "rf-20261101-00-00001", "déf", "x" * 41, "a\0"]
    expected = [_reference_hash(i.encode()) for i in ids]
    assert stable_id_hashes(pl.Series(ids)).tolist() == expected
    # a slice and a series of several chunks hash the same ids the same
    assert stable_id_hashes(pl.Series(ids).slice(2, 3)).tolist() == expected[2:5]
    chunked = pl.concat([pl.Series(ids[:3]), pl.Series(ids[3:])], rechunk=False)
    assert stable_id_hashes(chunked).tolist() == expected


@pytest.mark.parametrize(("window", "name", "start"), [
    ("1h", "2026-11-04T13:00Z", datetime(2026, 11, 4, 13, tzinfo=UTC)),
    ("6h", "2026-11-04T12:00Z", datetime(2026, 11, 4, 12, tzinfo=UTC)),
    ("1d", "2026-11-04", datetime(2026, 11, 4, tzinfo=UTC)),
    ("7d", "2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),  # weeks start on Monday
])
def test_windows_are_aligned_to_the_utc_clock(window: str, name: str, start: datetime) -> None:
    moment = datetime.fromisoformat("2026-11-04T15:45:00+02:00")  # 13:45 UTC, a Wednesday
    assert window_of(moment, window) == name
    assert window_start(name) == start


def test_a_listing_names_sizes_and_versions_without_reading(tmp_path: Path) -> None:
    (tmp_path / "d=1").mkdir()
    first = tmp_path / "d=1" / "a.jsonl"
    first.write_text("{}\n")
    (tmp_path / "notes.txt").write_text("not records")
    listed = partition_files(tmp_path)
    assert [(p.name, p.size) for p in listed] == [("d=1/a.jsonl", 3)]
    assert listed[0].version == str(first.stat().st_mtime_ns)
    assert [p.name for p in partition_files(str(tmp_path / "d=*" / "*.jsonl"))] == [
        "d=1/a.jsonl"]
    assert [p.name for p in partition_files(first)] == ["a.jsonl"]


def test_a_listing_against_what_was_read(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    seen = {p.name: Seen(p.name, p.path, p.size, p.version, "k", "r1", "r1")
            for p in partition_files(tmp_path)}
    (tmp_path / "b.jsonl").write_text("{}\n{}\n")  # rewritten: another size
    (tmp_path / "c.jsonl").unlink()  # retention
    (tmp_path / "d.jsonl").write_text("{}\n")
    found = changes(seen, partition_files(tmp_path))
    assert [p.name for p in found.new] == ["d.jsonl"]
    assert [p.name for p in found.rewritten] == ["b.jsonl"]
    assert [p.name for p in found.unchanged] == ["a.jsonl"]
    assert found.gone == ["c.jsonl"]
    assert [p.name for p in found.to_read] == ["b.jsonl", "d.jsonl"]


def _records(tmp_path: Path) -> pl.DataFrame:
    rows = []
    rng = np.random.default_rng(3)
    for i in range(400):
        confidence = float(np.round(rng.uniform(0.4, 1.0), 3))
        rest = round(1 - confidence, 3)
        probabilities = {"refund": confidence, "reject": round(rest / 2, 4),
                         "review": round(rest - round(rest / 2, 4), 4)}
        rows.append({"id": f"r{i}", "decision": "refund_request", "selected": "refund",
                     "probabilities": probabilities,
                     "outcome": LABELS[int(rng.integers(0, 3))] if i % 5 else None,
                     "metadata": {"locale": ["en", "de"][i % 2]}})
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = RecordSpec("refund_request", LABELS, 1e-6, ("locale",))
    return RecordReader(path, spec).read_all()


def test_labels_learnt_later_give_the_records_own_statistics(tmp_path: Path) -> None:
    spec = RecordSpec("refund_request", LABELS, 1e-6, ("locale",))
    table = _records(tmp_path)
    stats = BatchStats(spec, 10, 0.7)
    inline = stats(table)
    unlabelled = stats(table.with_columns(pl.lit(None, pl.Boolean).alias("outcome_correct")))
    known = table.filter(pl.col("outcome_correct").is_not_null())
    confidence = known["confidence"].to_numpy()
    correct = known["outcome_correct"].to_numpy()
    tokens = known["segment:locale"].to_list()
    names = sorted(set(tokens))
    learnt = correctness_stats(confidence, correct, np.zeros(known.height, dtype=np.int64),
                               [""], 10)
    learnt.update(correctness_stats(confidence, correct,
                                    np.array([names.index(t) for t in tokens]),
                                    [f"locale\x1f{t}" for t in names], 10))
    merged = merge_groups(unlabelled, learnt)
    assert set(merged) == set(inline)
    # labels carry correctness, not the outcome label: Brier and NLL stay the records' own
    outcome_only = ["with_outcome", "brier_sum", "nll_sum", "smooth_mass", "smooth_residual"]
    assert_frame_equal(stats_frame(merged).drop(outcome_only).sort("group"),
                       stats_frame(inline).drop(outcome_only).sort("group"))
    for group, expected in inline.items():
        grid, own = merged[group].smooth, expected.smooth
        assert grid is not None and own is not None
        np.testing.assert_allclose(grid.mass, own.mass, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grid.residual, own.residual, rtol=1e-12, atol=1e-12)


def _labels_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_labels_are_read_strictly(tmp_path: Path) -> None:
    good = _labels_file(tmp_path, ['{"id": "r1", "outcome": "refund"}', "",
                                   '{"id": "r2", "outcome": "review", '
                                   '"timestamp": "2026-11-02T10:00:00+01:00"}'])
    (listed,) = partition_files(good)
    table = read_labels(listed, LABELS, 3)
    assert table["outcome"].to_list() == [0, 2]
    assert table["seq"].to_list() == [3 << 32, (3 << 32) + 1]
    assert table["timestamp"].to_list()[1] == datetime(2026, 11, 2, 9, tzinfo=UTC)
    assert table["h"].to_list() == stable_id_hashes(pl.Series(["r1", "r2"])).view(
        np.int64).tolist()
    for lines, message in [
        (['{"id": "r1", "outcome": "maybe"}'], "record 1: outcome 'maybe' is not one"),
        (['{"id": "r1", "outcome": "refund", "extra": 1}'], "line 1: unknown field"),
        (['{"outcome": "refund"}'], "record 1: id: required"),
        (['{"id": "r1", "outcome": "refund", "timestamp": "2026-11-02T10:00:00"}'],
         "record 1: timestamp: must include a timezone"),
        (['{"id": "r1", "id": "r2", "outcome": "refund"}'], "line 1: not valid JSON"),
    ]:
        path = _labels_file(tmp_path, lines)
        with pytest.raises(DatasetError, match=message):
            read_labels(partition_files(path)[0], LABELS, 1)


def test_the_first_label_in_arrival_order_counts(tmp_path: Path) -> None:
    hashes = stable_id_hashes(pl.Series(["a", "b", "c", "z"])).view(np.int64)
    predictions = pl.DataFrame({
        "h": hashes[:3], "window": ["w"] * 3, "selected": pl.Series([0, 1, 2], dtype=pl.UInt8),
        "confidence": [0.9, 0.8, 0.7], "correct": pl.Series([-1, -1, 1], dtype=pl.Int8)})
    labels = pl.DataFrame({
        "h": [hashes[0], hashes[0], hashes[1], hashes[2], hashes[3]],
        "outcome": pl.Series([1, 0, 1, 0, 0], dtype=pl.UInt8),
        "seq": [5, 2, 3, 4, 6]})  # the label of seq 2 for `a` arrived first
    joined = join_labels(predictions, labels)
    assert joined.predictions["correct"].to_list() == [1, 1, 1]  # a: 0 == 0; c: inline
    assert joined.predictions["labelled"].to_list() == [True, True, False]
    assert (joined.joined, joined.repeated, joined.pending) == (2, 2, 1)


def test_labels_files_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.pipeline.monitor import labels as labels_module

    monkeypatch.setattr(labels_module, "MAX_LABELS_BYTES", 100)
    big = _labels_file(tmp_path, [json.dumps({"id": f"r{i}", "outcome": "refund"})
                                  for i in range(9)])
    with pytest.raises(DatasetError, match="larger than 100 bytes; a labels file holds"):
        read_labels(partition_files(big)[0], LABELS, 1)
    path = tmp_path / "labels.parquet"
    pl.DataFrame({"id": ["x" * 100_000], "outcome": ["refund"]}).write_parquet(
        path, compression="zstd")
    monkeypatch.setattr(labels_module, "MAX_LABELS_BYTES", path.stat().st_size + 10)
    with pytest.raises(DatasetError, match="once decompressed; a labels file holds at most"):
        read_labels(partition_files(path)[0], LABELS, 1)
