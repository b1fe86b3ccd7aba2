"""Replay of stored property failures (DecGuard's verified behaviour on the refund example)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, FIXTURES


def fuzz_report(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "store"
    out = tmp_path / "fuzz.json"
    code, _, err = run_cli("fuzz", str(EXAMPLES / "refund" / "decguard.yaml"),
                           "-b", "order_sensitive", "--store", str(store), "-o", str(out))
    assert code == 1, err
    return out, str(store)


def test_replay_reproduces_order_sensitive_failure(tmp_path: Path, monkeypatch):
    report, store = fuzz_report(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the stored contract copy makes replay work from anywhere
    out = tmp_path / "replay.json"
    code, text, err = run_cli("replay", str(report), "--id", "option_order/r1/2",
                              "--store", store, "-o", str(out))
    assert code == 1, err
    replay = json.loads(out.read_text())
    outcome = replay["outcomes"][0]
    assert outcome["reproduced"] and outcome["regenerated"] == "yes"
    kinds = [e["kind"] for e in outcome["examples"]]
    assert kinds == ["transformed", "reduced"]
    assert outcome["examples"][0]["violations"] == ["tv_distance 0.1 > 0.03"]
    assert "reproduces" in text


def test_replay_against_unbiased_backend_holds(tmp_path: Path):
    report, store = fuzz_report(tmp_path)
    code, text, _ = run_cli("replay", str(report), "-b", "default", "--store", store)
    assert code == 0
    assert "PASS: none of 27 stored failures reproduces" in text


def test_replay_unknown_id_and_test_report(tmp_path: Path):
    report, store = fuzz_report(tmp_path)
    code, _, err = run_cli("replay", str(report), "--id", "option_order/zz/9", "--store", store)
    assert code == 2 and "ids look like" in err
    out = tmp_path / "test.json"
    run_cli("test", str(EXAMPLES / "refund" / "decguard.yaml"), "--store", store, "-o", str(out))
    code, _, err = run_cli("replay", str(out), "--store", store)
    assert code == 2 and "fuzz or test --all" in err


def test_nothing_to_replay(tmp_path: Path):
    store = str(tmp_path / "store")
    out = tmp_path / "fuzz.json"
    code, _, _ = run_cli("fuzz", str(EXAMPLES / "refund" / "decguard.yaml"), "--store", store,
                         "-o", str(out))
    assert code == 0
    code, text, _ = run_cli("replay", str(out), "--store", store)
    assert code == 0 and "Nothing to replay" in text
    assert os.path.exists(out)


DECGUARD_FUZZ = FIXTURES / "decguard-reports" / (
    "refund-order_sensitive-fuzz.json"
)


def test_decguard_fuzz_report_is_shown_and_replayed(tmp_path: Path):
    code, text, err = run_cli("report", str(DECGUARD_FUZZ), "--store", str(tmp_path))
    assert code == 1, err
    assert "option_order         33 compared · 27 violating" in text
    assert "minimal: [reject, refund, review]" in text
    code, text, err = run_cli("replay", str(DECGUARD_FUZZ), "--id", "option_order/r1/2",
                              "-c", str(EXAMPLES / "refund" / "decguard.yaml"),
                              "--store", str(tmp_path))
    assert code == 1, err
    assert "option_order/r1/2: reproduces · regenerated from seed: yes" in text
