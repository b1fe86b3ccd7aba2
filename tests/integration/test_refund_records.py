"""The generator of partitioned refund records (`scripts/refund_records.py`) and the decflow
refund contract that judges them (`contracts/refund-monitor/decflow.yaml`): the records
validate, a longer run adds partitions without rewriting any, labels arrive later, late
records keep their own time, and the contract's evidence-gated check (the drift
deployment's) fails on a planted confidence shift and on a planted harmful shift but not
on records without one."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from decflow.contracts.loader import load_contract
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.refund_stream import CONTRACT, write_stream


def _deployment(tag: str) -> dict[str, Any]:
    """The parameters of the shipped deployment tagged `tag`."""
    document = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    (found,) = [d for d in document["deployments"] if tag in d["tags"]]
    parameters: dict[str, Any] = found["parameters"]
    return parameters


DRIFT = _deployment("drift")


def _generated_as_documented(folder: str) -> tuple[str, ...]:
    """The generator's options deployments/README.md gives for `folder`."""
    command = "python scripts/refund_records.py " + folder
    (line,) = [line for line in (ROOT / "deployments" / "README.md").read_text().splitlines()
               if line.startswith(command + " ")]
    return tuple(shlex.split(line)[3:])


def _check(project: Path, store: Path) -> tuple[int, dict]:
    """The drift deployment's check, its paths taken from `project` as a run's are from the
    project root."""
    report = project / "report.json"
    code, _, err = run_cli("check", str(ROOT / DRIFT["contract"]), "-d",
                           str(project / DRIFT["records"]), "--baseline",
                           str(project / DRIFT["baseline"]), "--store", str(store), "-f",
                           "json", "-o", str(report))
    assert code in (0, 1), err
    return code, json.loads(report.read_text())


def test_the_production_deployments_use_the_decflow_refund_contract() -> None:
    """Not DecGuard's example (no drift gate): the contract with evidence gating, drift gates
    and a harmful-shift monitor, for the drift check and the monitor alike."""
    monitor = _deployment("monitor")
    assert ROOT / DRIFT["contract"] == ROOT / monitor["contract"] == CONTRACT
    contract = load_contract(CONTRACT).contract
    assert contract.production is not None and contract.production.gating == "evidence"
    assert contract.production.requirements.limit("max_confidence_tv_distance") is not None
    assert contract.monitor is not None and contract.monitor.harmful_shift is not None
    assert Path(DRIFT["records"]).parent == Path(DRIFT["baseline"]).parent


def _failing(report: dict) -> list[str]:
    return [c["gate"] for c in report["checks"] if c["status"] == "fail"]


def test_layout_labels_and_a_longer_run(tmp_path: Path) -> None:
    out = tmp_path / "stream"
    write_stream(out, "--days", "2", "--per-hour", "10", "--baseline-days", "1",
                 "--late-share", "0.1")
    hours = sorted((out / "records").rglob("*.parquet"))
    assert len(hours) == 48 and hours[0].parent.name == "hour=00"
    assert sorted(p.parent.name for p in (out / "baseline").rglob("*.parquet")) == [
        "date=2026-10-31"]
    # outcomes arrive a day later: only the second day's arrivals are in the range
    assert [p.parent.name for p in (out / "labels").rglob("*.parquet")] == ["date=2026-11-02"]
    labels = pl.read_parquet(out / "labels" / "date=2026-11-02" / "labels.parquet")
    assert labels.columns == ["id", "outcome", "timestamp"]
    records = pl.read_parquet(out / "records" / "**" / "*.parquet")
    assert "outcome" not in records.columns
    assert records["id"].n_unique() == records.height
    assert set(labels["id"]) <= set(records["id"])
    joined = labels.join(records.select("id", pl.col("timestamp").alias("decided")), on="id")
    assert (joined["timestamp"] > joined["decided"]).all()
    # late records of the first day sit in the second day's first hour with their own time
    first = pl.read_parquet(out / "records" / "date=2026-11-02" / "hour=00" / "part-0.parquet")
    late = first.filter(pl.col("timestamp").dt.date() < pl.date(2026, 11, 2))
    assert late.height > 0
    stamps = {p: p.stat().st_mtime_ns for p in hours}
    before = (out / "records" / "date=2026-11-01" / "hour=05" / "part-0.parquet").read_bytes()
    write_stream(out, "--days", "3", "--per-hour", "10", "--baseline-days", "1",
                 "--late-share", "0.1")
    assert {p: p.stat().st_mtime_ns for p in hours} == stamps  # nothing rewritten
    assert len(list((out / "records").rglob("*.parquet"))) == 72
    again = tmp_path / "again"
    write_stream(again, "--days", "1", "--per-hour", "10", "--baseline-days", "0",
                 "--late-share", "0.1")
    assert (again / "records" / "date=2026-11-01" / "hour=05" / "part-0.parquet"
            ).read_bytes() == before  # the same seed, day and hour: the same records


ACCURACY = {"min_accuracy", "max_accuracy_drop"}
TV = {"max_confidence_tv_distance"}


@pytest.mark.parametrize(("shift", "fails", "holds"), [
    ((), set(), ACCURACY | TV),
    # calibration moves with the confidences (max_ece_increase may fail too); accuracy not
    (("--confidence-shift-from", "0"), TV, ACCURACY),
    # 0.10 -> 0.16: the drop is shown beyond 0.03; min_accuracy 0.85 may stay undecided
    (("--harmful-shift-from", "0"), {"max_accuracy_drop"}, TV),
])
def test_the_drift_deployment_fails_on_planted_shifts(tmp_path: Path, shift: tuple[str, ...],
                                                      fails: set[str], holds: set[str]) -> None:
    folder = str(Path(DRIFT["records"]).parent)
    write_stream(tmp_path / folder, *_generated_as_documented(folder), *shift)
    code, report = _check(tmp_path, tmp_path / "store")
    assert report["dataset"]["n_records"] == 2400 and report["baseline"]["n_records"] == 16800
    assert report["config"]["gating"] == "evidence"
    assert report["drift"] and all(v is not None for v in report["drift"].values())
    gated = {c["gate"] for c in report["checks"]}
    assert TV | {"max_accuracy_drop", "max_ece_increase"} <= gated  # drift is gated
    failing = set(_failing(report))
    assert fails <= failing and not holds & failing, failing
    assert code == (1 if fails else 0)
