"""`decflow monitor` on what shapes the pieces it keeps: a partition of no record (read as
an empty piece, never a store the next run calls damaged; a partition rewritten empty
drops the windows it alone held), and the contract's settings the pieces were made with
(stored at the first run; a later contract that changes one is refused, exit 2, naming
it; a state from before they were stored records them on its next run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import yaml

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


def _changed(tmp_path: Path, name: str, change: dict[str, dict[str, Any]]) -> Path:
    """The monitor's contract with some of its sections' settings changed."""
    contract = yaml.safe_load(CONTRACT.read_text())
    for section, values in change.items():
        contract[section] = {**contract[section], **values}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(contract))
    return path


def test_a_changed_setting_of_the_pieces_is_refused(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "2", *SMALL)
    shutil.move(_day(tmp_path, "2").parent, tmp_path / "later")
    code, _, err = _monitor(tmp_path)
    assert code in (0, 1), err
    shutil.move(tmp_path / "later", _day(tmp_path, "2").parent)
    bins = _changed(tmp_path, "bins.yaml", {"evaluation": {"calibration_bins": 20}})
    code, _, err = _monitor(tmp_path, bins)
    assert code == 2 and "internal error" not in err
    assert "evaluation.calibration_bins changed from 10 (the monitor's first run) to 20" in err
    assert "another store (--store)" in err
    window = _changed(tmp_path, "window.yaml", {"monitor": {"window": "6h"},
                                                "production": {"segments": ["locale"]}})
    code, _, err = _monitor(tmp_path, window)
    assert code == 2
    assert "monitor.window changed from '1d' (the monitor's first run) to '6h'" in err
    assert "production.segments changed from ['locale', 'channel']" in err
    # nothing was kept of the refused runs: the next run with the first settings reads on
    code, report, err = _monitor(tmp_path)
    assert code in (0, 1), err
    assert report["checked"] == ["2026-11-02"]


def test_a_state_from_before_stored_settings_records_them(tmp_path: Path) -> None:
    write_stream(tmp_path, "--days", "2", *SMALL)
    shutil.move(_day(tmp_path, "2").parent, tmp_path / "later")
    code, _, err = _monitor(tmp_path)
    assert code in (0, 1), err
    state_file = next((tmp_path / "store" / "monitors").glob("*/state.json"))
    state = json.loads(state_file.read_text())
    del state["settings"]
    state_file.write_text(json.dumps(state))
    # its window is known from before: a changed window is refused all the same
    window = _changed(tmp_path, "window.yaml", {"monitor": {"window": "6h"}})
    code, _, err = _monitor(tmp_path, window)
    assert code == 2 and "monitor.window changed from '1d'" in err
    shutil.move(tmp_path / "later", _day(tmp_path, "2").parent)
    code, report, err = _monitor(tmp_path)
    assert code in (0, 1), err
    assert report["checked"] == ["2026-11-02"]
    assert json.loads(state_file.read_text())["settings"]["evaluation.calibration_bins"] == 10
