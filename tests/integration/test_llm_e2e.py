"""End to end against real LLMs served by llama-cpp-python on 127.0.0.1: SmolLM2-135M-Instruct
and Gemma 3 270M base.

`decflow test --all` with the `openai` backend on a yes/no contract built from the typed-gguf
devset's 18 noul items, the hand-written support-ticket contract, and the three readouts of
issue 12: SmolLM2 through chat with first-token logprobs on [positive, negative, neutral];
SmolLM2 through completions (its chat markup in the prompt) with exact label likelihoods on
[Replace, Reject, Refund], whose first tokens collide; Gemma base through completions with
first-token logprobs. Every case is decided, label_mass is reported, and the models' position
bias shows up as a failing option_order property.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.llm


def devset_rows() -> list[dict]:
    text = importlib.resources.files("typed_gguf.bench").joinpath("devset.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def noul_contract(folder: Path, url: str) -> Path:
    rows = [r for r in devset_rows() if r["type"] == "noul"]
    assert len(rows) == 18
    with (folder / "cases.jsonl").open("w") as out:
        for row in rows:
            case = {
                "id": row["id"],
                "input": f"{row['state']}\n\nQuestion: {row['instructions']}",
                "expected": "yes" if row["gold"] else "no",
            }
            out.write(json.dumps(case) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {
            "name": "ops_yes_no",
            "type": "noul",
            "labels": ["yes", "no"],
            "description": "Answer the question about the situation with yes or no.",
        },
        "backend": {"provider": "openai", "url": url, "model": "smollm2-135m"},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": 2},
        "properties": {"option_order": {"max_tv_distance": 0.05, "max_flip_rate": 0}},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def example_contract(name: str, folder: Path, url: str, **backend: str) -> Path:
    """A copy of `contracts/<name>` whose backend asks `url` (other settings overridden)."""
    shutil.copytree(ROOT / "contracts" / name, folder, dirs_exist_ok=True)
    path = folder / "decflow.yaml"
    data = yaml.safe_load(path.read_text())
    data["backend"].update(url=url, **backend)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def support_contract(folder: Path, url: str) -> Path:
    return example_contract("support-llm", folder, url)


def run_all(contract: Path, tmp_path: Path, *options: str) -> dict:
    out = tmp_path / "report.json"
    code, _, err = run_cli("test", "--all", str(contract), "--store", str(tmp_path / "store"),
                           "-o", str(out), *options)
    report = json.loads(out.read_text())
    assert code == report["exit_code"], err
    return report


def assert_position_bias_found(report: dict) -> None:
    counts = report["metrics"]["counts"]
    assert counts["errored"] == 0 and counts["succeeded"] == counts["total"]
    for item in report["results"]:
        mass = item["result"]["metadata"]["label_mass"]
        assert 0 < mass <= 1.0 + 1e-9
    summary = next(s for s in report["properties"]["summaries"] if s["property"] == "option_order")
    assert summary["n_errors"] == 0 and summary["n_evaluated"] > 0
    assert summary["n_violations"] > 0  # distributions move with the option order
    check = next(c for c in report["checks"] if c["gate"] == "option_order.max_violation_rate")
    assert check["status"] == "fail"
    assert report["exit_code"] == 1


def test_noul_devset_contract(llm_server, tmp_path: Path):
    folder = tmp_path / "noul"
    folder.mkdir()
    report = run_all(noul_contract(folder, llm_server.url), tmp_path)
    assert report["metrics"]["counts"]["total"] == 18
    assert_position_bias_found(report)


def test_support_ticket_contract(llm_server, tmp_path: Path):
    report = run_all(support_contract(tmp_path / "support", llm_server.url), tmp_path)
    assert report["metrics"]["counts"]["total"] == 12
    assert_position_bias_found(report)
    failing = report["properties"]["failures"]
    assert failing and failing[0]["presentation"] is not None  # the shown order is recorded


def option_order_violation_rate(report: dict) -> float:
    check = next(c for c in report["checks"] if c["gate"] == "option_order.max_violation_rate")
    assert check["threshold"] == 0.25
    return float(check["value"])


def test_sentiment_chat_logprobs_with_the_tokenizer(llm_server, tmp_path: Path):
    contract = example_contract("sentiment-llm", tmp_path / "sentiment", llm_server.url)
    report = run_all(contract, tmp_path)
    assert_position_bias_found(report)
    assert option_order_violation_rate(report) > 0.25
    details = report["backend"]["details"]
    assert (details["api"], details["readout"], details["rule"]) == (
        "chat", "logprobs", "first_pieces")
    assert details["tokenizer"]["endpoint"].endswith("/extras/tokenize")
    # "negative" and "neutral" share letters, not tokens: each is a first piece of its own
    (table,) = details["first_pieces"]
    for label in ("positive", "negative", "neutral"):
        assert label in table["first_pieces"][label]


def test_returns_sequence_readout_on_colliding_labels(llm_server, tmp_path: Path):
    contract = example_contract("returns-llm", tmp_path / "returns", llm_server.url)
    logprobs = example_contract("returns-llm", tmp_path / "first-token", llm_server.url,
                                readout="logprobs")
    code, _, err = run_cli("test", "--all", str(logprobs), "--store", str(tmp_path / "s0"))
    assert code == 2 and "'Replace' and 'Reject' (both start with 'Re')" in err
    report = run_all(contract, tmp_path, "--no-minimize")
    assert report["metrics"]["counts"]["total"] == 5
    assert_position_bias_found(report)
    assert option_order_violation_rate(report) > 0.25
    details = report["backend"]["details"]
    assert (details["api"], details["readout"]) == ("completions", "sequence")
    check = details["echo_check"]
    assert abs(check["echo_logprob"] - check["top_logprob"]) <= 1e-3


def test_gemma_base_completions_logprobs(gemma_server, tmp_path: Path):
    contract = example_contract("sentiment-llm", tmp_path / "gemma", gemma_server.url,
                                api="completions", model="gemma-3-270m")
    report = run_all(contract, tmp_path, "--no-minimize")
    assert_position_bias_found(report)
    assert option_order_violation_rate(report) > 0.25
    details = report["backend"]["details"]
    assert (details["api"], details["readout"], details["rule"]) == (
        "completions", "logprobs", "first_pieces")
    assert details["tokenizer"]["special_prefix"] == [2]  # Gemma's BOS, removed from pieces
