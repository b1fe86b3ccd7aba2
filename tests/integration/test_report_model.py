"""The typed report model writes the report JSON DecGuard 0.1.1 wrote for the same run, and
reads any stored report back to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decflow.errors import ReportError
from decflow.report.diff_report import DiffReport
from decflow.report.model import Report
from decflow.report.run_report import RunReport
from decflow.store.store import json_bytes
from tests.support.paths import EXAMPLES, FIXTURES

DECGUARD_FUZZ = FIXTURES / "decguard-reports" / "refund-order_sensitive-fuzz.json"
IDENTITY = ("contract", "dataset", "backend", "health", "evaluation", "requirements",
            "warnings")


def stored_run(tmp_path: Path, mode: str, backend: str) -> bytes:
    """The bytes of `runs/<id>/report.json` after a run of the refund example."""
    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec
    from decflow.store.store import Store

    url = str(tmp_path / "store")
    spec = RunSpec(contract_path=str(EXAMPLES / "refund" / "decguard.yaml"), store_url=url,
                   run_id=f"model-{mode}", mode=mode, backend=backend)
    run_contract(spec, Store(url))
    return (tmp_path / "store" / "runs" / f"model-{mode}" / "report.json").read_bytes()


def without_path(section: Any) -> Any:
    """A section with its file path left out (DecGuard ran from the example's folder)."""
    return {k: v for k, v in section.items() if k != "path"} if isinstance(section, dict) \
        else section


def test_a_fuzz_report_is_written_as_decguard_wrote_it(tmp_path: Path) -> None:
    reference = json.loads(DECGUARD_FUZZ.read_text())
    written = json.loads(stored_run(tmp_path, "fuzz", "order_sensitive"))
    shared = [key for key in reference if key in written]
    assert shared == [key for key in written if key in reference]
    assert set(IDENTITY) | {"checks", "failures", "results"} <= set(shared)
    # json.dumps keeps key order: each section has DecGuard's keys, order and values
    for key in IDENTITY:
        assert json.dumps(without_path(written[key])) == json.dumps(without_path(reference[key]))
    assert json.dumps(written["checks"]) == json.dumps(reference["checks"])
    assert json.dumps(written["failures"]) == json.dumps(reference["failures"])
    assert [list(item) for item in written["results"]] == \
        [list(item) for item in reference["results"]]
    assert [list(item["result"]) for item in written["results"]] == \
        [list(item["result"]) for item in reference["results"]]


@pytest.mark.parametrize(("mode", "backend"), [("test", "default"), ("all", "order_sensitive")])
def test_a_stored_report_reads_back_to_its_bytes(tmp_path: Path, mode: str,
                                                 backend: str) -> None:
    data = stored_run(tmp_path, mode, backend)
    report = RunReport.read(json.loads(data), "report.json")
    assert json_bytes(report.to_dict()) == data
    assert report.contract.name == "refund_request"
    assert [c.gate for c in report.checks] == [c["gate"] for c in json.loads(data)["checks"]]


def test_a_decguard_report_reads_back_unchanged() -> None:
    document = json.loads(DECGUARD_FUZZ.read_text())
    report = RunReport.read(document, DECGUARD_FUZZ.name)
    assert json.dumps(report.to_dict()) == json.dumps(document)
    assert report.model_extra is not None and report.model_extra["decguard_version"]
    assert (report.backend.provider, report.evaluation.calibration_bins) == ("mock", 10)


def test_a_malformed_report_is_one_error_naming_each_field() -> None:
    document = json.loads(DECGUARD_FUZZ.read_text())
    document["checks"][1]["threshold"] = "0.5"
    document["dataset"]["n_cases"] = 10**30
    document["results"][0]["result"]["confidence"] = True
    with pytest.raises(ReportError) as refused:
        RunReport.read(document, "r.json")
    assert str(refused.value).splitlines()[1:] == [
        "  dataset.n_cases: must be less than 9223372036854775808, got 1000000000000000000000"
        "000000000",
        "  checks.1.threshold: expected a number, got the string '0.5'",
        "  results.0.result.confidence: expected a number, got a boolean",
    ]


def test_the_view_model_reads_any_report_kind() -> None:
    diff = json.loads((FIXTURES / "diff" / "refund-default.json").read_text())
    partial = {"mode": "stability", "status": "pass", "checks": [], "metrics": None}
    assert Report.view(partial).contract is None
    assert Report.view(partial).to_dict() == partial
    assert Report.view(diff).status == diff["status"]


def test_loading_gives_each_kind_its_typed_report(tmp_path: Path) -> None:
    from decflow.report.check_report import CheckReport
    from decflow.report.loading import load_verified
    from decflow.store.store import Store
    from tests.support.cli import run_cli

    data = stored_run(tmp_path, "test", "default")
    store = Store(str(tmp_path / "store"))
    run, source, run_id = load_verified("model-test", store)
    assert isinstance(run, RunReport) and (source, run_id) == ("run model-test", "model-test")
    assert run.to_dict() == json.loads(data)
    assert (run.status, run.dataset.n_cases, run.backend.name) == ("pass", 11, "default")
    code, _, _ = run_cli("check", str(EXAMPLES / "refund" / "decguard.yaml"), "-d",
                         str(EXAMPLES / "refund" / "production.jsonl"), "--store",
                         str(store.url), "-o", str(tmp_path / "check.json"))
    check, _, _ = load_verified(str(tmp_path / "check.json"), store)
    assert code == 0 and isinstance(check, CheckReport)
    assert (check.dataset.n_records, check.contract.name) == (4, "refund_request")
    assert [c.gate for c in check.checks] == \
        [c["gate"] for c in json.loads((tmp_path / "check.json").read_text())["checks"]]


def test_a_diff_report_is_a_typed_diff(tmp_path: Path) -> None:
    from decflow.pipeline.regression import run_diff
    from decflow.store.store import Store

    stored_run(tmp_path, "test", "default")
    store = Store(str(tmp_path / "store"))
    document = run_diff("model-test", "model-test", store)
    diff = DiffReport.read(document, "diff.json")
    assert diff.to_dict() == document and list(diff.to_dict()) == list(document)
    assert diff.baseline.dataset is not None and diff.baseline.dataset.n_cases == 11
    assert (diff.status, diff.same_dataset, diff.changes) == ("pass", True, [])


def test_a_model_writes_the_keys_it_was_given_in_their_order() -> None:
    from decflow.report.model import ArtifactRef, CheckRow, RunRef

    given = {"status": "fail", "gate": "g", "note": [1, 2], "level": "warning", "metric": "m",
             "comparison": "<=", "threshold": 0, "value": 0.5, "message": "m 0.5 > 0"}
    row = CheckRow.model_validate(given)
    assert json.dumps(row.to_dict()) == json.dumps(given)  # `0` stays an integer
    run = RunRef(store="s", id="r")
    run.artifacts = {"cases": ArtifactRef(rows=3)}
    run.regated_at = None
    assert json.dumps(run.to_dict()) == json.dumps(
        {"store": "s", "id": "r", "artifacts": {"cases": {"rows": 3}}, "regated_at": None})
