"""Sequential runs with diagnostics through the real stage graph, against a planted model
behind the HTTP backend (`tests.support.planted`: flaky cases turn over on every odd rerun,
biased cases' persona arms turn over at some places of worship): a clearly passing suite
with stability, blindness, a persona axis, macro-F1 and latency p95 stops early with the
full run's status; a model at its stability limit runs to the end and equals the full run;
an unstable or biased model stops at the proof; a resumed run equals an uninterrupted one;
`stability --sequential` decides the meter alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decflow.pipeline.contract_run.resume import resumed_spec
from decflow.pipeline.contract_run.runner import run_contract
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Store
from tests.support.cli import run_cli
from tests.support.compare import normalized
from tests.support.crash import crash_after
from tests.support.planted import planted_diagnostics_contract
from tests.support.servers.planted import PlantedServer

SETTINGS = {"alpha": 0.05, "max_cases": None, "batch": 16, "seed": 0, "zero_limit": 0.02}
DIAGNOSTICS = ("stability.verdict", "blindness.max_skew", "counterfactual.religion.max_flip_rate",
               "counterfactual.religion.max_error_rate")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with PlantedServer() as server:
        yield server.url("/decide")


ROUNDING_SEED = 32


def run(contract: Path, store: Path, run_id: str, sequential: dict[str, Any] | None = None,
        mode: str = "all") -> dict[str, Any]:
    # One rounding seed for every run, as one order seed: the full run's status a
    # sequential run promises is the one under its own seed.
    spec = RunSpec(contract_path=str(contract), store_url=str(store), run_id=run_id,
                   mode=mode, sequential=sequential, healthcheck=False,  # type: ignore[arg-type]
                   rounding_seed=ROUNDING_SEED)
    return run_contract(spec, Store(str(store)))


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["gate"]: c["status"] for c in report["checks"]}


def gates(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["gate"]: g for g in report["sequential"]["gates"]}


def test_clearly_passing_suite_with_diagnostics_stops_early(tmp_path: Path, url: str) -> None:
    contract = planted_diagnostics_contract(
        tmp_path / "suite", 800, url, wrong=0.02, flaky=0.0, biased=0.0,
        requirements={"min_accuracy": 0.85, "min_macro_f1": 0.8, "max_latency_p95_ms": 5000})
    full = run(contract, tmp_path / "store", "full")
    seq = run(contract, tmp_path / "store", "seq", SETTINGS)
    assert full["status"] == seq["status"] == "pass"
    assert set(DIAGNOSTICS) <= set(statuses(seq))
    section = seq["sequential"]
    assert section["stop_reason"] == "every gate decided"
    assert section["calls_made"] * 2.5 < section["calls_full"]
    decided = gates(seq)
    for gate in (*DIAGNOSTICS, "min_macro_f1", "max_latency_p95_ms"):
        assert decided[gate]["decision"] == "pass", gate
        assert decided[gate]["cases_used"] < 800, gate
    assert decided["counterfactual.religion.max_flip_rate"]["low"] < 0.0
    stability = next(c for c in seq["checks"] if c["gate"] == "stability.verdict")
    assert stability["evidence"]["verdict"] == "holds"
    assert "the full test's critical sums" in stability["evidence"]["method"]
    # Stability promises the full run's verdict; a persona axis a verdict about the model.
    assert decided["stability.verdict"]["promise"] == "full run"
    persona = decided["counterfactual.religion.max_flip_rate"]
    assert persona["promise"] == "model"
    check = next(c for c in seq["checks"]
                 if c["gate"] == "counterfactual.religion.max_flip_rate")
    assert any("not necessarily the full run's status" in n for n in check["evidence"]["notes"])


def test_model_at_its_stability_limit_gets_the_full_runs_not_established(
        tmp_path: Path, url: str) -> None:
    # 5 % of 300 cases flaky at ε = 0.05: the full run's verdict is not established; the
    # sequential run settles exactly that (the suite's flips shown between the full test's
    # holding and failing sums at 300 cases) and may stop before the last case.
    contract = planted_diagnostics_contract(tmp_path / "suite", 300, url, wrong=0.0,
                                            flaky=0.05, biased=0.0)
    full = run(contract, tmp_path / "store", "full")
    seq = run(contract, tmp_path / "store", "seq", {**SETTINGS, "batch": 8})
    assert statuses(seq) == statuses(full)
    assert statuses(full)["stability.verdict"] == "not_established"
    stability = gates(seq)["stability.verdict"]
    assert stability["decision"] == "not_established"
    assert stability["stop_reason"] in ("e-value reached 1/alpha",
                                        "every case of the suite sent")


@pytest.mark.parametrize(("flaky", "biased", "gate"), [
    (0.4, 0.0, "stability.verdict"),
    (0.0, 0.5, "counterfactual.religion.max_flip_rate"),
])
def test_unstable_or_biased_model_stops_at_the_proof(tmp_path: Path, url: str, flaky: float,
                                                     biased: float, gate: str) -> None:
    contract = planted_diagnostics_contract(tmp_path / "suite", 1000, url, wrong=0.0,
                                            flaky=flaky, biased=biased)
    seq = run(contract, tmp_path / "store", "seq", SETTINGS)
    assert seq["status"] == "fail"
    assert seq["sequential"]["stop_reason"] == f"requirement {gate} shown to fail"
    assert seq["sequential"]["cases_sent"] <= 200
    found = gates(seq)[gate]
    assert found["decision"] == "fail" and found["low"] > 0.05


def test_resumed_run_with_diagnostics_equals_an_uninterrupted_one(
        tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    contract = planted_diagnostics_contract(tmp_path / "suite", 500, url, wrong=0.02,
                                            flaky=0.01, biased=0.0)
    whole = run(contract, tmp_path / "store", "whole", SETTINGS)
    crash_after(monkeypatch, 9, lambda: run(contract, tmp_path / "store", "crashed", SETTINGS))
    store = Store(str(tmp_path / "store"))
    resumed = run_contract(resumed_spec(store, "crashed", str(contract), "all"), store)
    keyed = ("results", "minimized", "cases", "requests", "comparisons", "summary")
    left, right = normalized(whole, keyed), normalized(resumed, keyed)
    for report in (left, right):
        for key in ("call_seconds", "seconds_saved"):
            report["sequential"].pop(key)
    assert left == right


def test_stability_command_runs_the_meter_sequentially(tmp_path: Path, url: str) -> None:
    contract = planted_diagnostics_contract(tmp_path / "suite", 600, url, wrong=0.0,
                                            flaky=0.0, biased=0.0)
    code, out, err = run_cli("stability", str(contract), "--sequential", "--batch", "16",
                             "--no-healthcheck", "-f", "json", "--store",
                             str(tmp_path / "store"))
    assert code == 0, err
    report = json.loads(out)
    assert report["sequential"]["cases_sent"] < 600
    assert gates(report)["stability.verdict"]["decision"] == "pass"


def test_plan_counts_the_diagnostic_gates(tmp_path: Path, url: str) -> None:
    contract = planted_diagnostics_contract(
        tmp_path / "suite", 2000, url, wrong=0.0, flaky=0.0, biased=0.0,
        requirements={"min_accuracy": 0.85, "max_latency_p95_ms": 5000})
    code, out, err = run_cli("test", str(contract), "--all", "--sequential", "--plan",
                             "-f", "json", "--store", str(tmp_path / "store"))
    assert code == 0, err
    plan = json.loads(out)["sequential"]
    planned = {g["gate"]: g for g in plan["gates"]}
    assert set(DIAGNOSTICS) | {"max_latency_p95_ms"} <= set(planned)
    assert plan["suite_only"] == []
    assert planned["stability.verdict"]["holds_at"] == pytest.approx(0.01)
    assert planned["counterfactual.religion.max_flip_rate"]["rates_of"] == (
        "the excess over placebo")
    # The bar for a clear pass: at least 5x fewer calls than the full suite.
    assert plan["calls_if_all_hold"] * 5 <= plan["calls_full"]
