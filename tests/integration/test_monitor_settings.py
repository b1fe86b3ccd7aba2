"""`decflow monitor` on what shapes the pieces it keeps: a partition of no record (read as
an empty piece, never a store the next run calls damaged; a partition rewritten empty
drops the windows it alone held)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from tests.support.cli import run_cli
from tests.support.refund_stream import CONTRACT, write_stream

SMALL = ("--per-hour", "5", "--baseline-days", "1", "--partition", "day")


def _day(folder: Path, day: str) -> Path:
    return folder / "records" / f"date=2026-11-0{day}" / "part-0.parquet"


def _monitor(folder: Path, contract: Path = CONTRACT) -> tuple[int, dict[str, Any], str]:
    out = folder / "monitor.json"
    code, _, err = run_cli("monitor", str(contract), "-d", str(folder / "records"),
                           "--baseline", str(folder / "baseline"), "--store",
                           str(folder / "store"), "-f", "json", "-o", str(out))
    return code, json.loads(out.read_text()) if code in (0, 1) else {}, err


def _emptied(path: Path) -> None:
    """The partition rewritten with its schema and no row."""
    pl.read_parquet(path).head(0).write_parquet(path)


def test_an_empty_partition_is_read_as_no_record(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "3", *SMALL)
    third = _day(tmp_path, "3")
    shutil.copy(third, tmp_path / "third.parquet")
    _emptied(third)
    code, first, err = _monitor(tmp_path)
    assert code in (0, 1), err
    assert first["this_run"]["new"] == [f"date=2026-11-0{d}/part-0.parquet" for d in "123"]
    assert first["this_run"]["records_read"] == 240
    assert sorted(w["name"] for w in first["windows"]) == ["2026-11-01", "2026-11-02"]
    # the empty partition filled later is read again as a rewrite, like any partition
    shutil.copy(tmp_path / "third.parquet", third)
    code, second, err = _monitor(tmp_path)
    assert code in (0, 1), err
    assert second["this_run"]["rewritten"] == ["date=2026-11-03/part-0.parquet"]
    assert second["checked"] == ["2026-11-03"]
    # a partition rewritten empty leaves its window nothing to judge: it leaves the series
    _emptied(_day(tmp_path, "2"))
    code, third_run, err = _monitor(tmp_path)
    assert code in (0, 1), err
    assert third_run["this_run"]["windows_emptied"] == ["2026-11-02"]
    assert third_run["checked"] == []
    assert sorted(w["name"] for w in third_run["windows"]) == ["2026-11-01", "2026-11-03"]

