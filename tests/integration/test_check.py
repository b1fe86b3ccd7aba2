"""Production check end to end, against DecGuard 0.1.1's own check reports (external
oracle): numbers, checks, statuses and exit codes of the refund example, with the baseline
given as records, as an earlier decflow report and as DecGuard's report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from decflow.commands import check as check_command
from decflow.contracts import load_contract
from decflow.errors import DatasetError
from decflow.pipeline.production.run import check_records
from decflow.views.outputs import render_text
from tests.support.cli import run_cli
from tests.support.paths import FIXTURES, REFERENCE

EXAMPLE = REFERENCE / "decguard-examples" / "refund"
VECTORS = REFERENCE / "decguard-vectors"
COMPARED = ("status", "exit_code", "evaluation", "config", "metrics", "drift", "segments", "checks")


@pytest.fixture(scope="module")
def contract():
    return load_contract(EXAMPLE / "decguard.yaml").contract


def _oracle(name: str) -> dict:
    return json.loads((VECTORS / name).read_text())


def _assert_matches(report: dict, oracle: dict) -> None:
    for key in COMPARED:
        assert report[key] == oracle[key], key


def test_production_records_equal_decguard(contract) -> None:
    report = check_records(contract, str(EXAMPLE / "production.jsonl"))
    _assert_matches(report, _oracle("check-refund.json"))
    assert report["dataset"]["n_records"] == 4
    assert report["baseline"] is None
    assert report["report_version"] == "decflow/4" and report["kind"] == "check"


def test_drift_against_records_baseline_equals_decguard(contract) -> None:
    report = check_records(
        contract,
        str(EXAMPLE / "production-drift.jsonl"),
        baseline=str(EXAMPLE / "production.jsonl"),
    )
    _assert_matches(report, _oracle("check-refund-drift.json"))
    assert report["exit_code"] == 1
    assert report["baseline"]["source"] == "dataset"
    assert report["baseline"]["n_records"] == 4


def test_drift_against_earlier_reports_equals_decguard(contract, tmp_path: Path) -> None:
    earlier = check_records(contract, str(EXAMPLE / "production.jsonl"))
    ours = tmp_path / "earlier.json"
    ours.write_text(json.dumps(earlier))
    oracle = _oracle("check-refund-drift.json")
    # Our own report (records inline) and DecGuard's stored report (metrics only).
    for baseline in (ours, VECTORS / "check-refund.json"):
        report = check_records(
            contract, str(EXAMPLE / "production-drift.jsonl"), baseline=str(baseline)
        )
        _assert_matches(report, oracle)
        assert report["baseline"]["source"] == "report"
        assert report["baseline"]["n_records"] == 4


def test_baseline_report_for_another_decision_is_rejected(contract, tmp_path: Path) -> None:
    earlier = check_records(contract, str(EXAMPLE / "production.jsonl"))
    earlier["contract"]["name"] = "is_spam"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(earlier))
    with pytest.raises(DatasetError, match="decision 'is_spam'"):
        check_records(contract, str(EXAMPLE / "production-drift.jsonl"), baseline=str(path))


def test_text_view_shape(contract) -> None:
    report = check_records(
        contract,
        str(EXAMPLE / "production-drift.jsonl"),
        baseline=str(EXAMPLE / "production.jsonl"),
    )
    text = render_text(report)
    assert "  Calibration   ECE 0.975 · Brier 1.924 · NLL 4.432\n" in text
    assert "  Baseline      dataset · 4 records\n" in text
    assert (
        "  Drift         confidence TV 0.75 · mean delta 0.135 · accuracy drop 1 · "
        "ECE increase 0.815\n"
    ) in text
    assert "    FAIL locale=en · 2 records · accuracy 0 · ECE 0.985\n" in text
    assert text.endswith("FAIL: at least one post-deployment requirement does not hold\n")


def _cli() -> typer.Typer:
    app = typer.Typer()
    check_command.register(app)

    @app.callback()
    def main() -> None:
        """decflow"""

    return app


def test_command_exit_codes_and_json_output(tmp_path: Path) -> None:
    runner = CliRunner()
    contract = str(EXAMPLE / "decguard.yaml")
    passing = runner.invoke(_cli(), ["check", contract, "-d", str(EXAMPLE / "production.jsonl")])
    assert passing.exit_code == 0, passing.output
    assert passing.stdout.endswith("PASS: all post-deployment gates hold\n")
    assert passing.stderr.splitlines()[-1].startswith("run ")  # where it was stored
    out = tmp_path / "out" / "check.json"
    failing = runner.invoke(
        _cli(),
        [
            "check", contract, "-d", str(EXAMPLE / "production-drift.jsonl"),
            "--baseline", str(EXAMPLE / "production.jsonl"), "-f", "json", "-o", str(out),
        ],
    )
    assert failing.exit_code == 1
    written = json.loads(out.read_text())
    assert written["drift"] == _oracle("check-refund-drift.json")["drift"]


def test_partitioned_folder_and_parquet_give_the_same_report(contract, tmp_path: Path) -> None:
    lines = (EXAMPLE / "production.jsonl").read_text().splitlines()
    folder = tmp_path / "parts"
    (folder / "day=1").mkdir(parents=True)
    (folder / "day=2").mkdir()
    _as_parquet([json.loads(lines[0])], folder / "day=1" / "a.parquet")  # formats mixed
    (folder / "day=2" / "b.jsonl").write_text(lines[1] + "\n")
    (folder / "day=2" / "c.json").write_text(json.dumps([json.loads(lines[2])]))
    (folder / "day=2" / "d.jsonl").write_text(lines[3] + "\n")
    parquet = tmp_path / "records.parquet"
    _as_parquet([json.loads(line) for line in lines], parquet)
    single = check_records(contract, str(EXAMPLE / "production.jsonl"))
    for source in (str(folder), str(parquet), str(folder / "day=*" / "*")):
        other = check_records(contract, source)
        for key in (*COMPARED, "records"):
            assert other[key] == single[key], (source, key)
    assert check_records(contract, str(folder))["dataset"]["partitions"] == 4


def _as_parquet(records: list[dict], path: Path) -> None:
    rows = []
    for record in records:
        row = dict(record)
        row["metadata_json"] = json.dumps(row.pop("metadata"))
        rows.append(row)
    pl.DataFrame(rows).with_columns(
        pl.col("timestamp").str.to_datetime(time_zone="UTC")
    ).write_parquet(path)


def test_store_stages_give_the_same_report(contract, tmp_path: Path) -> None:
    from decflow.contracts import load_contract
    from decflow.data.records.units import plan_source
    from decflow.pipeline.production.baseline import BASELINE
    from decflow.pipeline.production.run import run_check
    from decflow.pipeline.production.stages import AGGREGATES, CheckSpec
    from decflow.pipeline.production.workers import read_units
    from decflow.pipeline.stage import run_stage, run_units
    from decflow.store.store import Store

    store = Store(str(tmp_path / "store"))
    source = str(EXAMPLE / "production-drift.jsonl")
    baseline = str(EXAMPLE / "production.jsonl")
    report = run_check(str(EXAMPLE / "decguard.yaml"), source, baseline, store=store)
    direct = check_records(contract, source, baseline=baseline)
    for key in (*COMPARED, "dataset", "records", "percentiles"):
        assert report[key] == direct[key], key
    _assert_matches(report, _oracle("check-refund-drift.json"))

    def nothing_to_read(_stage: object, _context: object, missing: list) -> list:
        raise AssertionError(f"read again: {missing}")

    loaded = load_contract(EXAMPLE / "decguard.yaml")
    spec = CheckSpec(str(EXAMPLE / "decguard.yaml"), source, store.location, "",
                     plan_source(source))
    # every unit is a cache hit
    again = BASELINE.context(spec, store, loaded, {}, units=nothing_to_read)
    aggregates = run_stage(AGGREGATES, again)
    assert [o.manifest for o in again.unit_outcomes] == [
        o.manifest for o in run_units(AGGREGATES, again)]
    # what a process computed merges to the same bits as what the store holds
    shutil.rmtree(tmp_path / "store" / "stages" / "aggregates")
    computed = BASELINE.context(spec, store, loaded, {}, units=read_units)
    assert run_stage(AGGREGATES, computed).sha256 == aggregates.sha256
    # The store holds statistics and id hashes, never the records.
    stored = list((tmp_path / "store" / "stages").rglob("*.parquet"))
    assert {p.name[:4] for p in stored} == {"ids-", "part"}
    for path in stored:
        assert not {"id", "probabilities", "selected"} & set(pl.read_parquet_schema(path))


def test_edited_baseline_report_is_rejected(contract, tmp_path: Path) -> None:
    from decflow.errors import ReportError

    earlier = check_records(contract, str(EXAMPLE / "production.jsonl"))
    earlier["records"][0]["latency_ms"] = 1.0  # the stored metrics no longer follow
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(earlier))
    with pytest.raises(ReportError, match="does not verify"):
        check_records(contract, str(EXAMPLE / "production-drift.jsonl"), baseline=str(path))


def test_command_with_a_store_gives_the_same_report(tmp_path: Path) -> None:
    args = ["check", str(EXAMPLE / "decguard.yaml"), "-d", str(EXAMPLE / "production.jsonl"),
            "-f", "json"]
    code, out, _ = run_cli(*args)
    direct = json.loads(out)
    code, staged, err = run_cli(*args, "--store", str(tmp_path / "store"))
    assert code == 0, err
    assert (tmp_path / "store" / "stages" / "records").is_dir()
    for key in (*COMPARED, "dataset", "records"):
        assert json.loads(staged)[key] == direct[key]


def test_mixed_records_equal_decguard() -> None:
    """Every optional field present or absent, a type-mixed segment key, a baseline:
    DecGuard's own report on the same files (tests/fixtures/check/README.md)."""
    fixtures = FIXTURES / "check"
    contract = load_contract(fixtures / "mixed-contract.yaml").contract
    oracle = json.loads((fixtures / "check-mixed.json").read_text())
    report = check_records(
        contract,
        str(fixtures / "mixed-current.jsonl"),
        baseline=str(fixtures / "mixed-baseline.jsonl"),
    )
    _assert_matches(report, oracle)
    assert report["baseline"]["metrics"] == oracle["baseline_metrics"]
    assert len(report["segments"]) == 12 and len(report["checks"]) == 59


def test_empty_dataset_is_an_error(contract, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    with pytest.raises(DatasetError, match=r"empty\.jsonl: production dataset contains no"):
        check_records(contract, str(tmp_path / "empty.jsonl"))


def _binomial_bound(count: int, n: int, *, lower: bool) -> float:
    """The exact one-sided 95 % bound of count/n by bisection on the binomial tail
    (P(X >= count) = 0.05 for the lower bound, P(X <= count) = 0.05 for the upper)."""
    from math import comb

    def tail(p: float) -> float:
        ks = range(count, n + 1) if lower else range(count + 1)
        return sum(comb(n, k) * p**k * (1 - p) ** (n - k) for k in ks)

    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if (tail(mid) > 0.05) == lower:
            high = mid
        else:
            low = mid
    return (low + high) / 2


def test_a_point_gated_pass_of_four_records_says_it_is_underpowered(contract) -> None:
    report = check_records(contract, str(EXAMPLE / "production.jsonl"))
    # DecGuard's verdicts, checks and exit code are unchanged ...
    _assert_matches(report, _oracle("check-refund.json"))
    # ... and the headline says what 4 records show: 4 of 4 right, 3 of 4 covered, 2 of 4
    # fallbacks, 2 of 2 right per locale
    bounds = [f"min_accuracy lower bound {0.05 ** (1 / 4):.4g}",
              f"min_threshold_coverage lower bound {_binomial_bound(3, 4, lower=True):.4g}",
              f"max_fallback_rate upper bound {_binomial_bound(2, 4, lower=False):.4g}"]
    assert bounds[0] == "min_accuracy lower bound 0.4729"
    (qualifier,) = report["qualifiers"]
    assert qualifier["name"] == "underpowered"
    listed = qualifier["detail"].split(", ")
    assert [listed[0], *listed[2:4]] == bounds
    assert listed[1].startswith("max_ece upper bound ") and listed[-1] == "+2 more"
    assert report["headline"] == f"PASS (underpowered: {qualifier['detail']}): 6/6 gates hold"


def test_a_point_gated_pass_with_enough_records_has_no_qualifier(
        contract, tmp_path: Path) -> None:
    records = [json.loads(line) for line in (EXAMPLE / "production.jsonl").read_text()
               .splitlines()]
    path = tmp_path / "many.jsonl"
    with path.open("w") as out:
        for i in range(600):  # the four records again and again, one locale: enough
            record = dict(records[i % 4], id=f"r{i}")
            record["metadata"] = {"locale": "en"}
            if i % 4 == 3:  # all confident and right, so ECE and coverage clear too
                record |= {"probabilities": {"refund": 0.95, "reject": 0.02, "review": 0.03},
                           "selected": "refund", "outcome": "refund"}
            out.write(json.dumps(record) + "\n")
    report = check_records(contract, str(path))
    assert report["status"] == "pass" and "qualifiers" not in report, report["headline"]
    assert report["headline"] == "PASS: 5/5 gates hold"
