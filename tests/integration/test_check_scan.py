"""How a check scans its input before reading it: a large local source in a child process
(the same scan as in this process, its errors included, and the scan here again when the
child cannot run), started by `decflow check` before its command line is parsed, in blocks
of equal size."""

from __future__ import annotations

import json
import os
import sys
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest

import decflow.data.records.units as record_units
import decflow.data.scan_process as scan_process
import decflow.pipeline.production.run as production_run
from decflow.commands.check import scan_ahead
from decflow.data.records.units import scan_source
from decflow.errors import DatasetError
from tests.support.paths import EXAMPLES

CONTRACT = EXAMPLES / "refund" / "decguard.yaml"


def _record(i: int) -> dict:
    top = ("refund", "reject", "review")[i % 3]
    probs = {"refund": 0.1, "reject": 0.1, "review": 0.1, top: 0.8}
    return {"id": f"r{i}", "decision": "refund_request", "probabilities": probs,
            "selected": top, "outcome": ("refund", "reject")[i % 2], "latency_ms": i % 97,
            "metadata": {"locale": ("en", "it")[i % 2]}}


def _source(folder: Path) -> Path:
    """A folder of JSONL (one with blank lines), Parquet and JSON-list record files."""
    folder.mkdir()
    lines = [json.dumps(_record(i)) for i in range(300)]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    spaced = [json.dumps(_record(i)) for i in range(500, 550)]
    (folder / "b.jsonl").write_text("\n\n".join(spaced) + "\n  \n")
    rows = []
    for i in range(300, 340):
        row = _record(i)
        row["metadata_json"] = json.dumps(row.pop("metadata"))
        rows.append(row)
    pl.DataFrame(rows).write_parquet(folder / "c.parquet", row_group_size=16)
    (folder / "d.json").write_text(json.dumps([_record(i) for i in range(400, 410)]))
    return folder


def _no_scan_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fallback scan in this process fail: what is returned came from the child."""
    def refused(source: object) -> None:
        raise AssertionError(f"scanned {source} in this process")

    monkeypatch.setattr(scan_process, "scan_source", refused)


def test_the_child_scans_as_this_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = str(_source(tmp_path / "logs"))
    expected = scan_source(source)
    _no_scan_here(monkeypatch)
    files, scanned = scan_process.scan_beside(source)()
    assert (files, scanned) == expected
    assert [s.n_records for s in scanned] == [300, 50, 40, 10]


def test_the_child_reports_a_bad_file_as_this_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError) as here:
        scan_source(str(bad))
    _no_scan_here(monkeypatch)
    with pytest.raises(DatasetError) as beside:
        scan_process.scan_beside(str(bad))()
    assert str(beside.value) == str(here.value)
    assert "not a readable Parquet file" in str(beside.value)


def test_a_child_that_cannot_run_leaves_the_scan_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = str(_source(tmp_path / "logs"))
    monkeypatch.setattr(sys, "executable", "/bin/false")  # starts, prints nothing, fails
    assert scan_process.scan_beside(source)() == scan_source(source)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    assert scan_process.scan_beside(source)() == scan_source(source)  # a thread instead


def test_only_large_local_sources_are_worth_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(tmp_path / "logs")
    assert not scan_process.worth_a_process(source)
    assert not scan_process.worth_a_process(tmp_path / "missing.jsonl")
    assert not scan_process.worth_a_process("s3://bucket/logs/")
    size = sum(p.stat().st_size for p in source.iterdir())
    monkeypatch.setattr(scan_process, "PROCESS_SCAN_BYTES", size)
    assert scan_process.worth_a_process(source)
    assert scan_process.worth_a_process(str(source))


def test_a_check_scanned_in_a_child_reports_as_one_scanned_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = str(_source(tmp_path / "logs"))
    here = production_run.run_check(str(CONTRACT), source, store=str(tmp_path / "s1"))
    started: list[str] = []
    monkeypatch.setattr(scan_process, "PROCESS_SCAN_BYTES", 0)
    original = scan_process.scan_beside

    def watched(records: str):  # type: ignore[no-untyped-def]
        started.append(records)
        return original(records)

    monkeypatch.setattr(production_run, "scan_beside", watched)
    _no_scan_here(monkeypatch)
    beside = production_run.run_check(str(CONTRACT), source, store=str(tmp_path / "s2"))
    assert started == [source]
    assert _without_run(beside) == _without_run(here)
    assert beside["dataset"]["hash"] == here["dataset"]["hash"]


def _without_run(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("run", "created_at")}


@pytest.mark.parametrize("args", [
    ["check", "c.yaml", "-d", "{src}"],
    ["check", "c.yaml", "--dataset", "{src}", "--store", "x"],
    ["check", "--dataset={src}", "c.yaml"],
])
def test_decflow_check_starts_its_scan_before_parsing_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    source = str(_source(tmp_path / "logs"))
    scan_ahead([a.format(src=source) for a in args])
    started = production_run._scans_ahead.get(source)
    assert started is not None
    assert production_run.start_scan(source) is started  # taken over, not started again
    assert source not in production_run._scans_ahead
    assert started() == scan_source(source)


@pytest.mark.parametrize("args,prefect_url", [
    (["check", "c.yaml", "-d", "{src}", "--prefect"], None),
    (["check", "c.yaml", "-d", "{src}", "--help"], None),
    (["check", "c.yaml", "-d", "{src}"], "http://127.0.0.1:4200/api"),
    (["test", "c.yaml", "-d", "{src}"], None),
    (["check", "c.yaml", "--", "-d", "{src}"], None),
    (["check", "c.yaml", "-d"], None),
])
def test_no_scan_ahead_for_prefect_runs_help_or_other_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], prefect_url: str | None
) -> None:
    if prefect_url:
        monkeypatch.setenv("PREFECT_API_URL", prefect_url)
    else:
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    source = str(_source(tmp_path / "logs"))
    scan_ahead([a.format(src=source) for a in args])
    assert production_run._scans_ahead == {}


def test_a_check_keeps_openblas_to_one_thread_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    source = str(_source(tmp_path / "logs"))
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    scan_ahead(["check", "c.yaml", "-d", source])
    production_run.start_scan(source)()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    scan_ahead(["check", "c.yaml", "-d", source])
    production_run.start_scan(source)()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"  # the user's setting
    # the scanning child never uses BLAS: one thread whatever this process has
    seen = tmp_path / "seen"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$OPENBLAS_NUM_THREADS\" > {seen}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    assert scan_process.scan_beside(source)() == scan_source(source)
    assert seen.read_text().strip() == "1"


def test_the_check_command_itself_keeps_openblas_to_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called without `decflow`'s entry point (no scan ahead), as the SDK's tests do."""
    from decflow.cli import invoke

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    source = str(_source(tmp_path / "logs"))
    code = invoke(["check", str(CONTRACT), "-d", source, "--store", str(tmp_path / "s")])
    assert code in (0, 1)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"


def test_jsonl_blocks_are_as_equal_as_the_file_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_units, "_READ_BYTES", 10_000)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(_record(i)) + "\n" for i in range(120)))
    size = path.stat().st_size
    scanned = record_units.scan_file(str(path))
    starts = [start for start, _, _ in scanned.blocks] + [size]
    lengths = [b - a for a, b in pairwise(starts)]
    longest_line = max(len(line) + 1 for line in path.read_bytes().split(b"\n"))
    assert len(lengths) == -(-size // 10_000)
    # each block ends at the end of a line after its share: not n full blocks and a short one
    assert max(lengths) - min(lengths) <= (len(lengths) - 1) * longest_line
    assert min(lengths) > 10_000 * 3 // 4
    assert sum(records for _, _, records in scanned.blocks) == 120
