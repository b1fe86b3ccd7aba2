"""What a remote `decflow test` does while its backend is called: the code and views of the
stages after the calls are prepared then (`commands.ahead`, the later stages' `Deferred`
computes), never before the first request and never beside a later stage, and the run's
report is the one a run without that overlap writes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.compare import normalized
from tests.support.servers.counting import counting_service, write_contract

CASES = 150


def test_the_pipeline_is_defined_without_the_code_after_the_calls() -> None:
    """Importing the contract run's pipeline loads none of the later stages' code nor the
    sequential driver: a run's first request does not wait for them."""
    found = subprocess.run(
        [sys.executable, "-c", "import sys, decflow.pipeline.contract_run.runner; "
         "print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    for later in ("decflow.pipeline.contract_run.summary",
                  "decflow.pipeline.contract_run.comparisons",
                  "decflow.pipeline.contract_run.sequential.calls",
                  "decflow.views.outputs", "decflow.views.html"):
        assert later not in found


def _report(store: Path) -> dict[str, Any]:
    (run,) = (store / "runs").iterdir()
    # each run in a store of its own: its paths named alike
    text = (run / "report.json").read_text().replace(str(store), "STORE")
    report: dict[str, Any] = json.loads(text)
    return normalized(report, ("results", "summary"))


def test_a_run_prepares_its_later_stages_during_the_calls_and_reports_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.commands import ahead, contract_run
    from decflow.pipeline.contract_run import summary

    events: list[tuple[str, float, int]] = []
    with counting_service(delay_s=0.01) as service:
        def answered() -> int:
            return sum(service.snapshot()[1].values())

        def traced(spec: Any) -> Any:
            work = ahead.after_calls(spec)

            def run() -> None:
                events.append(("work", time.monotonic(), answered()))
                work()
                events.append(("worked", time.monotonic(), answered()))

            return run

        build = summary.build_report

        def building(*args: Any, **kwargs: Any) -> Any:
            events.append(("summary", time.monotonic(), answered()))
            return build(*args, **kwargs)

        monkeypatch.setattr(contract_run, "after_calls", traced)
        monkeypatch.setattr(summary, "build_report", building)
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=4)
        code, _, err = run_cli("test", str(contract), "--store", str(tmp_path / "a"))
        assert code == 0, err
        # the same run without the overlap: everything prepared where it is first used
        monkeypatch.setattr(ahead.Ahead, "_start", lambda self: None)
        code, _, err = run_cli("test", str(contract), "--store", str(tmp_path / "b"))
        assert code == 0, err
    names = [name for name, _, _ in events]
    assert names == ["work", "worked", "summary", "summary"], events
    (_, _, first), (_, ended, _), (_, judged, _), _ = events
    assert 1 <= first < CASES  # from the first answer, while the calls are in flight
    assert ended <= judged  # joined before the summary stage
    assert _report(tmp_path / "a") == _report(tmp_path / "b")
