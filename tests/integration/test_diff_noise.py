"""`decflow diff` against rerun noise, end to end: two runs of a seeded noisy decision server
(8 % of answers flip between two calls, the model never changes), an evidence-gated
contract, and the noise measured by `--noise-reruns` as a child run of the candidate —
made once, resumed after an interruption, never acceptable as a baseline — then
`runs trend`. Plus the gating rule for DecGuard contracts and the contract hash."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import decflow
from decflow.contracts import load_contract
from decflow.errors import Interrupted
from decflow.pipeline.regression import run_diff
from decflow.store.runs import FINISHED, noise_run_id, read_run_record
from decflow.store.store import Store
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.servers.noisy_decider import NoisyDecider, dataset_lines
from tests.support.servers.recording import RecordingServer

CASES = 120
LIMITS = {"max_answer_flip_rate": 0.02, "max_mean_tv_distance": 0.05,
          "max_accuracy_drop": 0.05}


@pytest.fixture
def noisy(tmp_path: Path) -> Iterator[tuple[Path, str, RecordingServer]]:
    decider = NoisyDecider(seed=3)
    with RecordingServer(decider) as server:
        (tmp_path / "cases.jsonl").write_text(dataset_lines(decider, CASES))
        contract = tmp_path / "noisy.yaml"
        contract.write_text(yaml.safe_dump({
            "schema_version": "0.1",
            "decision": {"name": "noisy_refund", "type": "choice",
                         "options": ["refund", "reject", "review"]},
            "backend": {"provider": "http", "url": server.url("/decide")},
            "dataset": "cases.jsonl",
            "regression": {**LIMITS, "gating": "evidence"},
        }))
        yield contract, str(tmp_path / "store"), server


def contract_run(contract: Path, store: str) -> str:
    code, out, err = run_cli("test", str(contract), "--store", store, "-f", "json")
    assert code == 0, err
    return str(json.loads(out)["run"]["id"])


def diff(*args: str) -> dict[str, Any]:
    code, out, err = run_cli("diff", *args, "-f", "json")
    assert code in (0, 1), err
    return dict(json.loads(out))


def interrupt_after(calls: int) -> Callable[[str, int | None], Callable[[int, int | None], None]]:
    """One Ctrl-C, as a person presses it, once `calls` results are in. Raising on every
    later result would be a second and third Ctrl-C during the cleanup, which stops the
    cleanup itself and leaves the loop's calls unfinished."""
    pressed = False

    def factory(_name: str, _total: int | None) -> Callable[[int, int | None], None]:
        def update(done: int, _total: int | None) -> None:
            nonlocal pressed
            if done >= calls and not pressed:
                pressed = True
                raise KeyboardInterrupt
        return update
    return factory


def test_noise_reruns_turn_raw_flips_into_attributed_verdicts(
    noisy: tuple[Path, str, RecordingServer],
) -> None:
    contract, store, server = noisy
    baseline, candidate = contract_run(contract, store), contract_run(contract, store)
    assert len(server.requests) == 2 * CASES

    unmeasured = diff(baseline, candidate, "--store", store)
    checks = {c["gate"]: c for c in unmeasured["checks"]}
    assert unmeasured["shift"]["answer_flip_rate"] > LIMITS["max_answer_flip_rate"]
    for gate in ("max_answer_flip_rate", "max_mean_tv_distance"):
        assert checks[gate]["status"] == "not_established"  # never a FAIL on raw flips
        assert "--noise-reruns 2" in checks[gate]["message"]
    assert unmeasured["evidence"]["noise"] == {
        "measured": False, "advice": unmeasured["evidence"]["noise"]["advice"]}
    assert unmeasured["status"] != "fail"

    # the noise run is interrupted after 100 calls, then resumed by the next diff
    with pytest.raises(Interrupted):
        run_diff(baseline, candidate, Store(store), noise_reruns=2,
                 progress=interrupt_after(100))
    child = noise_run_id(candidate, 2)
    assert read_run_record(Store(store), child)["status"] == "interrupted"
    sent = len(server.requests) - 2 * CASES
    measured = diff(baseline, candidate, "--store", store, "--noise-reruns", "2")
    resent = len(server.requests) - 2 * CASES - sent
    assert sent >= 100 and resent < 2 * CASES - 80
    assert sent + resent <= 2 * CASES + 16  # at most a concurrency window sent twice
    record = read_run_record(Store(store), child)
    assert (record["kind"], record["noise_of"]) == ("noise", candidate)
    assert record["status"] in FINISHED  # its own report: the stability meter on K draws
    noise = measured["evidence"]["noise"]
    assert noise["measured"] and noise["pairs"] == 2 * CASES
    assert noise["sources"] == [f"noise run {child} ({2 * CASES} draws)"]
    checks = {c["gate"]: c for c in measured["checks"]}
    assert checks["max_answer_flip_rate"]["metric"] == "attributed_flip_rate"
    assert checks["max_answer_flip_rate"]["status"] != "fail"
    assert measured["headline"].startswith(("PASS", "WARN"))

    again = len(server.requests)
    page = contract.parent / "diff.html"
    diff(baseline, candidate, "--store", store, "--noise-reruns", "2", "--html", str(page))
    assert len(server.requests) == again  # the finished noise run is reused
    html = page.read_text()
    assert "<h2>Evidence</h2>" in html and "<h2>Trend</h2>" in html
    sdk = decflow.run_diff(baseline, candidate, store=store, noise_reruns=2)
    assert sdk["evidence"]["gates"] == measured["evidence"]["gates"]
    assert sdk["headline"] == measured["headline"]

    code, _, err = run_cli("runs", "accept", child, "--store", store, "--force")
    assert code == 2 and "noise" in err
    assert run_cli("runs", "accept", baseline, "--store", store)[0] == 0
    code, out, _ = run_cli("runs", "trend", "noisy_refund", "--store", store)
    assert code == 0 and f"* {baseline}" in out and child not in out
    assert "max_error_rate" in out


def test_a_decguard_contract_keeps_point_verdicts_with_evidence_beside(tmp_path: Path) -> None:
    refund = ROOT / "contracts" / "refund" / "decflow.yaml"
    store = str(tmp_path / "store")
    ids = []
    for backend in ("default", "order_sensitive"):
        _, out, _ = run_cli("test", str(refund), "-b", backend, "--store", store, "-f", "json")
        ids.append(json.loads(out)["run"]["id"])
    report = diff(*ids, "--store", store)
    assert report["evidence"]["gating"] == "point"
    assert "DecGuard 0.1 contract" in report["evidence"]["why"]
    assert all("evidence" not in check for check in report["checks"])  # DecGuard's keys
    assert report["status"] == "fail"  # mean TV 0.0508 > 0.03, as DecGuard
    assert {g["gate"] for g in report["evidence"]["gates"]} >= {"max_mean_tv_distance"}


def test_an_unset_gating_never_enters_the_contract_hash(tmp_path: Path) -> None:
    source = ROOT / "contracts" / "refund" / "decflow.yaml"
    plain = load_contract(source).hash
    document = yaml.safe_load(source.read_text())
    document["regression"]["gating"] = "point"
    edited = tmp_path / "decflow.yaml"
    edited.write_text(yaml.safe_dump(document))
    (tmp_path / "cases.jsonl").write_text((source.parent / "cases.jsonl").read_text())
    assert load_contract(edited).hash != plain
    del document["regression"]["gating"]
    edited.write_text(yaml.safe_dump(document))
    assert load_contract(edited).hash == plain


def test_the_extensions_that_switch_a_diff_to_evidence_gating(tmp_path: Path) -> None:
    from decflow.contracts.extensions import decflow_extensions
    from decflow.pipeline.diff_evidence import gating_rule

    source = ROOT / "contracts" / "refund" / "decflow.yaml"
    (tmp_path / "cases.jsonl").write_text((source.parent / "cases.jsonl").read_text())
    document = yaml.safe_load(source.read_text())
    edited = tmp_path / "decflow.yaml"

    def loaded(**changes: Any) -> Any:
        edited.write_text(yaml.safe_dump({**document, **changes}))
        return load_contract(edited).contract

    plain = loaded()
    assert decflow_extensions(plain) == []
    assert gating_rule(plain, ({}, {}))[0] == "point"
    smooth = loaded(requirements={**document["requirements"], "max_smooth_ece": 0.05})
    assert decflow_extensions(smooth) == ["requirements.max_smooth_ece"]
    assert gating_rule(smooth, ({}, {})) == (
        "evidence", "the contract uses decflow extensions (requirements.max_smooth_ece)")
    point = loaded(regression={**document["regression"], "gating": "point"},
                   diagnostics={"stability": {"repeats": 4}})
    assert gating_rule(point, ({}, {})) == ("point", "regression.gating: point")
    assert gating_rule(smooth, ({"report_version": "0.1"}, {}))[0] == "point"  # DecGuard file
