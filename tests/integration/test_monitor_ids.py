"""`decflow monitor` on records without an `id` (ids are optional): those that carry their
outcome inline feed the harmful-shift alarm as the same records with ids do — read as
they arrive, appended to a partition written again, and replayed when the detector starts
again — while a labels file, naming decisions by id, cannot label them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from tests.support.cli import run_cli
from tests.support.refund_stream import CONTRACT, write_stream

STREAM = ("--days", "4", "--per-hour", "5", "--baseline-days", "1", "--partition", "day",
          "--harmful-shift-from", "0", "--shifted-error-rate", "0.5", "--outcomes-inline")


def _day(folder: Path, day: int) -> Path:
    return folder / "records" / f"date=2026-11-0{day}" / "part-0.parquet"


def _monitor(folder: Path, contract: Path, baseline: str) -> dict[str, Any]:
    out = folder / "monitor.json"
    code, _, err = run_cli("monitor", str(contract), "-d", str(folder / "records"),
                           "--labels", str(folder / "labels"), "--baseline",
                           str(folder / baseline), "--store", str(folder / "store"),
                           "-f", "json", "-o", str(out))
    assert code in (0, 1), err
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _runs(folder: Path, contract: Path) -> list[dict[str, Any]]:
    """Days 1-2 read, then day 3, then day 3's partition written again with day 4's records
    appended, then another baseline (the detector starts again and replays the history)."""
    day3, day4 = _day(folder, 3), _day(folder, 4)
    shutil.move(day3, folder / "day3.parquet")
    shutil.rmtree(day4.parent)  # only ever read appended to day 3's partition
    reports = [_monitor(folder, contract, "baseline")]
    shutil.move(folder / "day3.parquet", day3)
    reports.append(_monitor(folder, contract, "baseline"))
    appended = pl.concat([pl.read_parquet(day3), pl.read_parquet(folder / "day4.parquet")])
    appended.write_parquet(day3)
    reports.append(_monitor(folder, contract, "baseline"))
    other = folder / "other-baseline" / "part-0.parquet"
    other.parent.mkdir()
    baseline = pl.read_parquet(folder / "baseline" / "**" / "*.parquet")
    baseline.head(baseline.height - 1).write_parquet(other)
    reports.append(_monitor(folder, contract, "other-baseline"))
    return reports


def _stream(folder: Path, ids: bool) -> None:
    write_stream(folder, *STREAM)
    shutil.copy(_day(folder, 4), folder / "day4.parquet")
    if not ids:
        for path in [*(folder / "records").rglob("*.parquet"), folder / "day4.parquet"]:
            pl.read_parquet(path).drop("id").write_parquet(path)


def test_records_without_an_id_feed_the_alarm_with_their_inline_outcomes(
        tmp_path: Path) -> None:
    contract = yaml.safe_load(CONTRACT.read_text())
    # the harmful-shift alarm alone: no drift gate to fail the windows
    contract["production"] = {"gating": "evidence", "warnings": {"max_fallback_rate": 0.6}}
    shift_only = tmp_path / "shift-only.yaml"
    shift_only.write_text(yaml.safe_dump(contract))
    found = {}
    for name, ids in (("ids", True), ("none", False)):
        _stream(tmp_path / name, ids)
        found[name] = _runs(tmp_path / name, shift_only)
    for with_ids, without in zip(found["ids"], found["none"], strict=True):
        assert without["headline"].startswith("ALARM since 2026-11-01 "), without["headline"]
        assert without["headline"] == with_ids["headline"]
        assert without["harmful_shift"] == with_ids["harmful_shift"]
        assert ([(w["name"], w["n_labelled"]) for w in without["windows"]]
                == [(w["name"], w["n_labelled"]) for w in with_ids["windows"]])
    shifts = [r["harmful_shift"] for r in found["none"]]
    # 120 records a day: days 1-2, day 3, day 4's appended to day 3 (day 3's not again)
    assert [s["labelled"] for s in shifts] == [240, 360, 480, 480]
    assert [s["replayed"] for s in shifts] == [240, None, None, 480]
    # the labels name decisions by id: none can label a record without one
    last = found["none"][-1]["this_run"]
    assert found["none"][1]["this_run"]["labels_joined"] == 0
    assert last["labels_pending"] > 0
    assert last["labels_pending"] == found["ids"][-1]["this_run"]["labels_repeated"]


def test_records_without_an_id_or_an_outcome_are_not_kept(tmp_path: Path) -> None:
    write_stream(tmp_path, *STREAM[:-1])  # outcomes only in the labels, by id
    for path in (tmp_path / "records").rglob("*.parquet"):
        pl.read_parquet(path).drop("id").write_parquet(path)
    report = _monitor(tmp_path, CONTRACT, "baseline")
    assert report["this_run"]["records_read"] == 480
    assert report["harmful_shift"]["labelled"] == 0
    assert report["this_run"]["labels_pending"] > 0
    pieces = tmp_path / "store" / "monitors" / "*" / "pieces"
    kept = pl.read_parquet(pieces / "*.predictions.parquet")
    assert kept.height == 0
