"""A stored production check is a run like any other: `report RUN` shows it (and re-gates it
with `-c`), `diff A B` of two check runs is B's drift against A (DecGuard's drift numbers
and point-estimate gates, as `check B --baseline A-records` gives them), `check --baseline
RUN` and `--baseline accepted` take a check run as the baseline, `runs accept` accepts one;
on JSONL and Parquet records. Kinds that do not fit are exit 2 saying so, naming the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import REFERENCE, ROOT

EXAMPLE = REFERENCE / "decguard-examples" / "refund"
VECTORS = REFERENCE / "decguard-vectors"
JUDGED = ("status", "exit_code", "headline", "metrics", "drift", "segments", "checks")
# drift gates on top of the example's production gates (DecGuard's point estimates)
DRIFT_GATES = {"max_confidence_tv_distance": 0.5, "max_accuracy_drop": 0.2}


def as_parquet(source: Path, target: Path) -> Path:
    rows = []
    for line in source.read_text().splitlines():
        row = json.loads(line)
        row["metadata_json"] = json.dumps(row.pop("metadata"))
        rows.append(row)
    pl.DataFrame(rows).with_columns(
        pl.col("timestamp").str.to_datetime(time_zone="UTC")).write_parquet(target)
    return target


@pytest.fixture(params=["jsonl", "parquet"])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    """(earlier records, later drifted records) in one format."""
    earlier, later = EXAMPLE / "production.jsonl", EXAMPLE / "production-drift.jsonl"
    if request.param == "jsonl":
        return earlier, later
    return (as_parquet(earlier, tmp_path / "earlier.parquet"),
            as_parquet(later, tmp_path / "later.parquet"))


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    document = yaml.safe_load((EXAMPLE / "decguard.yaml").read_text())
    document["production"].setdefault("warnings", {}).update(DRIFT_GATES)
    path = tmp_path / "contract" / "decguard.yaml"
    path.parent.mkdir()
    shutil.copy(EXAMPLE / "cases.jsonl", path.parent / "cases.jsonl")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def check(contract: Path, records: Path, store: Path, *more: str) -> dict[str, Any]:
    out = store.parent / "check.json"
    code, _, err = run_cli("check", str(contract), "-d", str(records), "--store", str(store),
                           "-o", str(out), *more)
    report: dict[str, Any] = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return report


def cli_json(*args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(*args, "-f", "json")
    return code, json.loads(out) if out else {}, err


def test_two_check_runs_diff_as_drift(contract: Path, records: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = check(contract, records[0], store)["run"]["id"]
    later = check(contract, records[1], store)["run"]["id"]
    against_records = check(contract, records[1], store, "--baseline", str(records[0]))

    code, diff, err = cli_json("diff", earlier, later, "--store", str(store))
    assert code == diff["exit_code"] == 1, err
    assert diff["kind"] == "check"
    assert diff["baseline"]["source"] == "run" and diff["baseline"]["run_id"] == earlier
    for key in JUDGED:
        assert diff[key] == against_records[key], key
    # DecGuard's own drift numbers for these records
    assert diff["drift"] == json.loads((VECTORS / "check-refund-drift.json").read_text())[
        "drift"]
    gates = {c["gate"]: c["status"] for c in diff["checks"]}
    assert gates["max_confidence_tv_distance"] == "warn"  # 0.75 > 0.5
    assert gates["max_accuracy_drop"] == "warn"  # 1.0 > 0.2
    # no drift between a run and itself
    code, same, _ = cli_json("diff", earlier, earlier, "--store", str(store))
    assert same["drift"]["confidence_tv_distance"] == 0.0 and code == 0


def test_a_check_run_is_the_baseline_of_a_later_check(contract: Path,
                                                       records: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = check(contract, records[0], store)["run"]["id"]
    against_records = check(contract, records[1], store, "--baseline", str(records[0]))
    against_run = check(contract, records[1], store, "--baseline", earlier)
    for key in JUDGED:
        assert against_run[key] == against_records[key], key
    assert against_run["baseline"]["run_id"] == earlier
    assert against_run["baseline"]["path"] == f"run {earlier}"

    code, _, err = run_cli("check", str(contract), "-d", str(records[1]), "--store",
                           str(store), "--baseline", "accepted")
    assert code == 2
    assert "no accepted check run for decision 'refund_request'" in err
    # without a baseline of its own, its drift gates are n/a: WARN, accepted with --force
    code, out, _ = run_cli("runs", "accept", earlier, "--force", "--store", str(store))
    assert code == 0 and out.startswith(f"accepted {earlier} (WARN) as the baseline")
    assert "(backend records)" in out
    against_accepted = check(contract, records[1], store, "--baseline", "accepted")
    assert against_accepted["baseline"]["run_id"] == earlier
    assert against_accepted["drift"] == against_run["drift"]


def test_a_check_run_shows_and_re_gates(contract: Path, records: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored = check(contract, records[0], store)
    run_id = stored["run"]["id"]
    code, shown, err = cli_json("report", run_id, "--store", str(store))
    assert code == 0 and shown == stored, err
    code, text, _ = run_cli("report", run_id, "--store", str(store))
    assert code == 0 and text.startswith(stored["headline"])

    stricter = yaml.safe_load(contract.read_text())
    stricter["production"]["requirements"]["min_threshold_coverage"] = 0.9
    strict_path = contract.parent / "strict.yaml"
    strict_path.write_text(yaml.safe_dump(stricter, sort_keys=False))
    code, regated, _ = cli_json("report", run_id, "-c", str(strict_path), "--store",
                                str(store))
    assert code == regated["exit_code"] == 1
    assert regated["metrics"] == stored["metrics"]
    (gate,) = [c for c in regated["checks"] if c["gate"] == "min_threshold_coverage"]
    assert gate["threshold"] == 0.9 and gate["status"] == "fail"
    # what was re-gated verifies when read back
    out = tmp_path / "regated.json"
    out.write_text(json.dumps(regated))
    assert run_cli("report", str(out))[0] == 1


def test_kinds_that_do_not_fit_are_refused_naming_the_run(contract: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    checked = check(contract, EXAMPLE / "production.jsonl", store)["run"]["id"]
    out = tmp_path / "run.json"
    assert run_cli("test", str(ROOT / "contracts" / "refund" / "decflow.yaml"), "--store",
                   str(store), "-o", str(out))[0] == 0
    tested = json.loads(out.read_text())["run"]["id"]

    code, _, err = run_cli("diff", checked, tested, "--store", str(store))
    assert code == 2
    assert err == (f"error: cannot diff a check (run {checked}) with a test run: diff two "
                   "contract runs (regression) or two check runs (drift)\n")
    code, _, err = run_cli("check", str(contract), "-d", str(EXAMPLE / "production.jsonl"),
                           "--store", str(store), "--baseline", tested)
    assert code == 2
    assert err == (f"error: run {tested} is a test run, not a check run: a check's baseline "
                   "is records, a check report or a check run\n")
    code, _, err = run_cli("check", str(contract), "-d", str(EXAMPLE / "production.jsonl"),
                           "--store", str(store), "--baseline", "20990101-000000-abcdef")
    assert code == 2
    assert err == ("error: --baseline '20990101-000000-abcdef' is neither records or a report "
                   f"(no such file or folder) nor a run id in the store {store} (see `decflow "
                   "runs`)\n")
    code, _, err = run_cli("test", str(contract), "--store", str(store), "--resume", checked)
    assert code == 2 and err == (
        f"error: run {checked} is a check run, not a run run; resume it with `decflow check "
        "CONTRACT --resume RUN`\n")
