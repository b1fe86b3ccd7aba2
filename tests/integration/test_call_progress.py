"""Progress counts calls as they come back, not shards: a run of fewer calls than a shard
(5,000) against a slow service shows lines between 0 and the total while it calls (the
plain lines of a run whose stderr is not a terminal; the live bar and the Prefect progress
artifact are fed by the same updates)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.servers.counting import counting_service, write_contract

CASES = 60


def test_progress_moves_while_a_shard_is_called(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from decflow.commands import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.2)
    with counting_service(delay_s=0.05) as service:
        contract = write_contract(tmp_path, service.url, CASES, max_concurrency=2)
        code, _, err = run_cli("test", str(contract), "--store", str(tmp_path / "store"))
    assert code == 0, err
    done = [int(n) for n in re.findall(rf"^(\d+)/{CASES} calls \(", err, re.MULTILINE)]
    assert done[-1] == CASES, err
    # about 1.5 s of calls at a line every 0.2 s: several lines before the end
    assert [n for n in done if 0 < n < CASES], err
    assert done == sorted(done), err
