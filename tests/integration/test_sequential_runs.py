"""Sequential runs through the real stage graph on the mock backend with planted rates:
they stop early when the status is clear and say why, run to the end (equal to the full
run) at the limit, resume without re-sending, agree across batch sizes, and the command
line refuses settings that do not apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from decflow.contracts import load_contract
from decflow.pipeline.contract_run.resume import resumed_spec
from decflow.pipeline.contract_run.runner import run_contract
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Store
from decflow.views.html import render_html
from decflow.views.markdown import render_markdown
from decflow.views.outputs import render_text
from tests.support.cli import run_cli
from tests.support.compare import normalized
from tests.support.crash import crash_after
from tests.support.planted import planted_contract

SETTINGS = {"alpha": 0.05, "max_cases": None, "batch": 8, "seed": 0, "zero_limit": 0.02}


ROUNDING_SEED = 32


def run(contract: Path, store: Path, run_id: str, sequential: dict[str, Any] | None = None,
        mode: str = "all") -> dict[str, Any]:
    # One rounding seed for every run, as one order seed: a sequential run promises the
    # full run's status under its own seed.
    spec = RunSpec(contract_path=str(contract), store_url=str(store), run_id=run_id,
                   mode=mode, sequential=sequential,  # type: ignore[arg-type]
                   rounding_seed=ROUNDING_SEED)
    return run_contract(spec, Store(str(store)))


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["gate"]: c["status"] for c in report["checks"]}


def test_clearly_passing_suite_stops_early_with_the_full_status(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 1000, wrong=0.03, flips=0.005)
    full = run(contract, tmp_path / "store", "full")
    seq = run(contract, tmp_path / "store", "seq", SETTINGS)
    assert full["status"] == seq["status"] == "pass"
    section = seq["sequential"]
    assert section["calls_full"] == 2000
    assert section["calls_made"] * 2.5 < section["calls_full"]
    assert section["stop_reason"] == "every gate decided"
    assert {g["decision"] for g in section["gates"]} == {"pass"}
    for gate in section["gates"]:
        assert gate["low"] <= gate["estimate"] <= gate["high"]
    zero = next(c for c in seq["checks"] if c["gate"] == "max_error_rate")
    assert "zero_limit 0.02" in " ".join(zero["evidence"]["notes"])
    assert seq["headline"].startswith("PASS")
    summary = render_markdown(seq)  # the Prefect report artifact
    assert f"**Sequential:** {section['calls_made']} of 2000 backend calls" in summary
    assert "Sequential (alpha 0.05" in render_text(seq)
    page = render_html(seq)
    assert "<h2>Sequential run</h2>" in page and "option_order.max_flip_rate" in page


def test_clearly_failing_suite_stops_at_the_proof(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 1000, wrong=0.35, flips=0.0)
    seq = run(contract, tmp_path / "store", "seq", SETTINGS)
    assert seq["status"] == "fail"
    section = seq["sequential"]
    assert section["cases_sent"] <= 100
    assert section["stop_reason"] == "requirement min_accuracy shown to fail"
    accuracy = next(c for c in seq["checks"] if c["gate"] == "min_accuracy")
    assert accuracy["status"] == "fail" and accuracy["evidence"]["high"] < 0.85


def test_suite_at_the_limit_runs_to_the_end_and_equals_the_full_run(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 300, wrong=0.15, flips=0.0)
    full = run(contract, tmp_path / "store", "full")
    seq = run(contract, tmp_path / "store", "seq", SETTINGS)
    assert seq["sequential"]["cases_sent"] == 300
    assert seq["sequential"]["stop_reason"] == "every case of the suite sent"
    assert statuses(seq) == statuses(full)
    assert seq["status"] == full["status"] == "pass"
    measured = ("latency",)  # wall-clock: differs between any two runs
    assert ({k: v for k, v in seq["metrics"].items() if k not in measured}
            == {k: v for k, v in full["metrics"].items() if k not in measured})
    # Gates decided by the whole suite show what the full run shows (its evidence, or its
    # point value for a DecGuard contract), not the wider time-uniform interval, which can
    # straddle the limit the verdict is on.
    shown = {c["gate"]: (c["evidence"]["estimate"], c["evidence"]["low"], c["evidence"]["high"])
             if c.get("evidence") else (c["value"], None, None) for c in full["checks"]}
    at_end = [g for g in seq["sequential"]["gates"]
              if g["stop_reason"] == "every case of the suite sent"]
    assert [g["gate"] for g in at_end] == ["min_accuracy"]
    for gate in at_end:
        assert (gate["estimate"], gate["low"], gate["high"]) == shown[gate["gate"]]


def test_resumed_run_equals_an_uninterrupted_one(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    contract = planted_contract(tmp_path / "suite", 600, wrong=0.03, flips=0.005)
    whole = run(contract, tmp_path / "store", "whole", SETTINGS)
    crash_after(monkeypatch, 7, lambda: run(contract, tmp_path / "store", "crashed", SETTINGS))
    store = Store(str(tmp_path / "store"))
    spec = resumed_spec(store, "crashed", str(contract), "all")
    resumed = run_contract(spec, store)
    keyed = ("results", "minimized", "cases", "requests", "comparisons", "summary")
    timing = ("call_seconds", "seconds_saved")
    left, right = normalized(whole, keyed), normalized(resumed, keyed)
    for report in (left, right):
        for key in timing:
            report["sequential"].pop(key)
    assert left == right
    # No request was sent twice: one recorded row per sent request.
    folder = store.path(store.stage_prefix("results", resumed["run"]["artifacts"]["results"]
                                           ["path"].rsplit("/", 1)[-1]))
    rows = pl.concat([pl.read_parquet(p) for p in Path(folder).glob("chunk-*.parquet")])
    assert rows.height == rows["request_id"].n_unique() == resumed["sequential"]["calls_made"]


def test_batch_sizes_agree_on_the_status(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 800, wrong=0.03, flips=0.005)
    found = {batch: run(contract, tmp_path / "store", f"b{batch}", {**SETTINGS, "batch": batch})
             for batch in (1, 8, 64)}
    assert {r["status"] for r in found.values()} == {"pass"}
    assert found[64]["sequential"]["cases_sent"] % 64 == 0


def test_sequential_section_and_options(tmp_path: Path) -> None:
    plain = planted_contract(tmp_path / "plain", 50, wrong=0.0, flips=0.0)
    code, _out, err = run_cli("test", str(plain), "--alpha", "0.1", "--store",
                              str(tmp_path / "store"))
    assert code == 2 and "--alpha" in err and "--sequential" in err
    section = planted_contract(tmp_path / "section", 50, wrong=0.0, flips=0.0,
                               extra={"sequential": {"batch": 5}})
    doc = yaml.safe_load(section.read_text(encoding="utf-8"))
    doc["backend"]["price_per_call"] = 0.001
    section.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    assert load_contract(str(section)).hash != load_contract(str(plain)).hash
    code, out, _err = run_cli("test", str(section), "-f", "json", "--store",
                              str(tmp_path / "store"), "--zero-limit", "0.1")
    assert code == 0, out
    report = json.loads(out)
    assert report["sequential"]["batch"] == 5
    assert report["sequential"]["zero_limit"] == 0.1
    assert report["sequential"]["money_saved"] == pytest.approx(
        0.001 * report["sequential"]["calls_saved"])
    code, _out, err = run_cli("test", str(section), "--zero-limit", "1.5", "--store",
                              str(tmp_path / "store"))
    assert code == 2 and "--zero-limit" in err


def test_golden_only_contract_runs_sequentially_in_test_mode(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 600, wrong=0.02, flips=0.0)
    doc = yaml.safe_load(contract.read_text(encoding="utf-8"))
    del doc["properties"]
    contract.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    seq = run(contract, tmp_path / "store", "seq", SETTINGS, mode="test")
    assert seq["status"] == "pass"
    assert [g["gate"] for g in seq["sequential"]["gates"]] == ["min_accuracy", "max_error_rate"]
    assert seq["sequential"]["cases_sent"] < 600


def test_plan_prints_the_cases_each_gate_needs(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 2000, wrong=0.0, flips=0.0)
    code, out, err = run_cli("test", str(contract), "--all", "--sequential", "--plan",
                             "-f", "json", "--store", str(tmp_path / "store"))
    assert code == 0, err
    plan = json.loads(out)["sequential"]
    gates = {g["gate"]: g for g in plan["gates"]}
    # The clear suite: flip rate 1 % under 5 %, accuracy 0.95 over 0.85.
    assert gates["option_order.max_flip_rate"]["holds_at"] == pytest.approx(0.01)
    assert gates["min_accuracy"]["holds_at"] == pytest.approx(0.95)
    assert plan["cases_if_all_hold"] * 5 <= 2000
    assert plan["calls_full"] == 4000  # an original and one reversed order per case
    assert plan["calls_if_all_hold"] == 2 * plan["cases_if_all_hold"]
    assert gates["max_error_rate"]["fails_at"] is None  # at the first occurrence
    assert not (tmp_path / "store" / "runs").exists() or not any(
        (tmp_path / "store" / "runs").iterdir())


def test_sdk_runs_sequentially(tmp_path: Path) -> None:
    from decflow.errors import DecflowError
    from decflow.sdk import run_test

    contract = planted_contract(tmp_path / "suite", 600, wrong=0.5, flips=0.0)
    report = run_test(contract, store=str(tmp_path / "store"), sequential={"batch": 4})
    assert report["status"] == "fail" and report["sequential"]["batch"] == 4
    assert report["sequential"]["cases_sent"] < 100
    assert "sequential" not in run_test(contract, store=str(tmp_path / "store"))
    with pytest.raises(DecflowError, match=r"sequential\.alpha"):
        run_test(contract, store=str(tmp_path / "store"), sequential={"alpha": 2})


def test_ece_gate_is_decided_by_its_bins(tmp_path: Path) -> None:
    contract = planted_contract(tmp_path / "suite", 1500, wrong=0.0, flips=0.0)
    doc = yaml.safe_load(contract.read_text(encoding="utf-8"))
    doc["requirements"]["max_ece"] = 0.02  # every answer is 0.9 sure and right: ECE 0.1
    contract.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    full = run(contract, tmp_path / "store", "full", mode="test")
    seq = run(contract, tmp_path / "store", "seq", SETTINGS, mode="test")
    assert full["status"] == seq["status"] == "fail"
    assert seq["sequential"]["stop_reason"] == "requirement max_ece shown to fail"
    ece = next(g for g in seq["sequential"]["gates"] if g["gate"] == "max_ece")
    assert ece["low"] > 0.02 and ece["cases_used"] < 1500


def test_a_pass_at_zero_limit_says_so_first_in_every_view_and_on_its_gate(
        tmp_path: Path) -> None:
    """A sequential run that stops early has not seen every case: its implicit
    `max_error_rate: 0` passes as a share below zero_limit, and the headline of every view
    (text, JSON, Markdown, HTML, JUnit; the Prefect state message is the same headline) and
    the gate's own line say so, with how many errored cases may be unseen."""
    contract = planted_contract(tmp_path / "suite", 1000, wrong=0.0, flips=0.0)
    doc = yaml.safe_load(contract.read_text(encoding="utf-8"))
    del doc["properties"]
    contract.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    files = {name: tmp_path / name for name in ("r.json", "r.md", "r.html", "r.xml")}
    code, out, err = run_cli(
        "test", str(contract), "--sequential", "--batch", "8", "--order-seed", "0",
        "--store", str(tmp_path / "store"), "-o", str(files["r.json"]),
        "--markdown", str(files["r.md"]), "--html", str(files["r.html"]),
        "--junit", str(files["r.xml"]))
    assert code == 0, err
    report = json.loads(files["r.json"].read_text())
    sent = report["sequential"]["cases_sent"]
    assert sent < 1000
    # 1000 cases at zero_limit 0.02: a share below it is at most 19 errored cases
    detail = f"max_error_rate judged at 0.02, 0 of {sent} sent; up to 19 errored cases unseen"
    first = f"PASS (zero_limit: {detail}): 2/2 gates hold"
    assert report["headline"] == out.splitlines()[0] == first
    assert report["qualifiers"] == [{"name": "zero_limit", "detail": detail}]
    assert report["report_version"] == "decflow/4"
    assert files["r.md"].read_text().splitlines()[0] == "**" + first.replace("_", "\\_") + "**"
    html = files["r.html"].read_text()
    assert f'<p class="headline">{first}</p>' in html and f"<title>{first} · " in html
    junit = files["r.xml"].read_text()
    assert f'name="message" value="{first}"' in junit
    gate_line = f"error_rate 0 <= 0 (zero_limit: {detail.removeprefix('max_error_rate ')})"
    (check,) = [c for c in report["checks"] if c["gate"] == "max_error_rate"]
    assert check["status"] == "pass" and check["message"] == gate_line
    assert f"max_error_rate                         {gate_line}" in out
    assert gate_line.replace("_", "\\_").replace("<", "&lt;") in files["r.md"].read_text()
    assert gate_line.replace("<", "&lt;") in html
    assert f"<system-out>{gate_line.replace('<', '&lt;')}</system-out>" in junit
    # the whole suite sent: a count over every case, no zero_limit
    code, out, _ = run_cli("test", str(contract), "--sequential", "--max-cases", "1000",
                           "--batch", "1000", "--store", str(tmp_path / "store"))
    assert code == 0 and out.splitlines()[0] == "PASS: 2/2 gates hold"


def test_the_order_seed_is_drawn_per_run_recorded_and_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `sequential.seed` / `--order-seed` each run draws its order's seed and
    records it (report, run record); `--resume` of an interrupted run replays it, and
    `--order-seed` with the recorded seed repeats the order."""
    from decflow.contracts.sections import Sequential

    contract = planted_contract(tmp_path / "suite", 300, wrong=0.03, flips=0.005)
    drawn = {Sequential.settings(None, True, {})["seed"] for _ in range(5)}  # type: ignore[index]
    assert len(drawn) > 1
    settings = Sequential.settings(None, True, {"batch": 8})
    assert settings is not None
    crash_after(monkeypatch, 3, lambda: run(contract, tmp_path / "store", "crashed", settings))
    store = Store(str(tmp_path / "store"))
    spec = resumed_spec(store, "crashed", str(contract), "all")
    assert spec.sequential == settings  # the drawn seed, as recorded
    resumed = run_contract(spec, store)
    assert resumed["sequential"]["seed"] == settings["seed"]
    code, out, err = run_cli("test", str(contract), "--all", "--sequential", "--batch", "8",
                             "--order-seed", str(settings["seed"]), "--store",
                             str(tmp_path / "store"), "-f", "json")
    assert code == 0, err
    again = json.loads(out)["sequential"]
    assert again["seed"] == settings["seed"]
    assert again["gates"] == resumed["sequential"]["gates"]


def test_calls_made_counts_what_the_server_received(tmp_path: Path) -> None:
    """A sequential run over HTTP (no retry) where one case's original errors: its
    option_order variants are recorded as errors and never sent, so the report's
    `calls_made` is the number of requests the server received, not the rows stored."""
    from tests.support.servers.recording import Recorded, RecordingServer, Reply

    def answer(request: Recorded) -> Reply:
        body = request.json()
        if "zzbroken" in body["input"]:
            return Reply(500, {"error": "down"})
        return Reply(body={"probabilities": {"good": 0.9, "bad": 0.1}})

    contract = planted_contract(tmp_path / "suite", 400, wrong=0.0, flips=0.0)
    doc = yaml.safe_load(contract.read_text(encoding="utf-8"))
    cases = (tmp_path / "suite" / "cases.jsonl").read_text().splitlines()
    # every case is broken but one in eight: the run stops at the first error it sees
    (tmp_path / "suite" / "cases.jsonl").write_text("".join(
        line.replace('"input": "case', '"input": "zzbroken case' if i % 8 else '"input": "case')
        + "\n" for i, line in enumerate(cases)))
    with RecordingServer(answer) as server:
        doc["backend"] = {"provider": "http", "url": server.url("/decide"), "max_retries": 0}
        contract.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        spec = RunSpec(contract_path=str(contract), store_url=str(tmp_path / "store"),
                       run_id="seq", mode="all", sequential=SETTINGS,  # type: ignore[arg-type]
                       healthcheck=False)
        report = run_contract(spec, Store(str(tmp_path / "store")))
        received = sum(r.method == "POST" for r in server.requests)
    section = report["sequential"]
    assert report["status"] == "fail" and section["cases_sent"] < 400
    stored = section["cases_sent"] * 2  # an original and one option_order variant per case
    assert report["run"]["artifacts"]["requests"]["rows"] == stored
    assert section["calls_made"] == received < stored
