"""How every view names a check's or monitor's baseline: records by their path, a stored
run by its id, once (`run ID`, never `run · run ID`)."""

from __future__ import annotations

from decflow.views.identity import baseline_text


def test_records_are_named_by_source_and_path() -> None:
    block = {"source": "dataset", "path": "examples/refund-stream/baseline",
             "n_records": 16800, "hash": "sha256:" + "a1" * 32}
    assert baseline_text(block) == (
        "dataset · examples/refund-stream/baseline · 16800 records · sha256:a1a1a1a1a1a1")


def test_a_stored_run_is_named_once_by_its_id() -> None:
    block = {"source": "run", "path": "run 20261206-095718-0292c3", "n_records": 16800,
             "run_id": "20261206-095718-0292c3"}
    assert baseline_text(block) == "run 20261206-095718-0292c3 · 16800 records"


def test_a_report_file_keeps_its_source_word() -> None:
    block = {"source": "report", "path": "reports/run-report.json", "n_records": 4}
    assert baseline_text(block) == "report · reports/run-report.json · 4 records"
