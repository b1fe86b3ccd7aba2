"""`--sequential` with the `openai` backend under each LLM readout (logprobs with labels and
with letters, sequence, sample) against the fake OpenAI-compatible server: each clearly
passing suite stops before its last case with the full run's status and checks, and the
server saw fewer completion requests than in the full run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_backend_openai import ANSWERS, COMPLETION_PATHS, SMOLLM2_VOCAB
from tests.support.cli import run_cli
from tests.support.servers.fake_openai import FakeOpenAI

CASES = 240
OPTIONS = ["refund", "replace", "reject"]

# Each readout's settings and a server that favours "refund", the expected label of every
# case (the sampled answers vary in form only: concurrent calls interleave the server's cycle).
READOUTS: dict[str, tuple[dict[str, Any], Callable[[], FakeOpenAI]]] = {
    "logprobs": ({}, lambda: FakeOpenAI({"ref": 0.8, "re": 0.1, "replace": 0.1},
                                        tokenizer="llama-cpp-python", vocab=SMOLLM2_VOCAB)),
    "letters": ({"options_as": "letters"}, lambda: FakeOpenAI({"A": 0.8, "B": 0.1, "C": 0.1})),
    "sequence": ({"api": "completions", "readout": "sequence"},
                 lambda: FakeOpenAI({"The": 0.5, " I": 0.2}, answers=ANSWERS)),
    "sample": ({"readout": "sample", "samples": 3, "temperature": 0.7},
               lambda: FakeOpenAI(completions=["refund", "Refund.", "I would refund"])),
}


def contract(folder: Path, url: str, settings: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": f"Return number {i}: the parcel arrived late.",
                    "expected": "refund"}) + "\n" for i in range(CASES)))
    document = {
        "schema_version": "0.1",
        "decision": {"name": "returns", "type": "choice", "options": OPTIONS,
                     "description": "What should we do with this return?"},
        "backend": {"provider": "openai", "url": url, "model": "smollm2-135m", **settings},
        "dataset": "cases.jsonl",
        "requirements": {"min_accuracy": 0.85},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def completions(server: Any) -> int:
    return sum(r.path in COMPLETION_PATHS for r in server.requests)


def run(path: Path, store: Path, report: Path, *options: str) -> dict[str, Any]:
    code, _, err = run_cli("test", str(path), "--store", str(store), "-o", str(report), *options)
    document: dict[str, Any] = json.loads(report.read_text())
    assert code == document["exit_code"], err
    return document


@pytest.mark.parametrize("readout", list(READOUTS))
def test_sequential_run_under_each_readout_stops_early_with_the_full_status(
    tmp_path: Path, readout: str,
) -> None:
    settings, fake = READOUTS[readout]
    with fake().serve() as server:
        path = contract(tmp_path / "c", server.url("/v1"), settings)
        full = run(path, tmp_path / "store", tmp_path / "full.json")
        full_requests = completions(server)
        server.requests.clear()
        seq = run(path, tmp_path / "store", tmp_path / "seq.json", "--sequential")
        seq_requests = completions(server)
    assert full["metrics"]["counts"]["errored"] == 0
    assert seq["status"] == full["status"] == "pass"
    assert ({c["gate"]: c["status"] for c in seq["checks"]}
            == {c["gate"]: c["status"] for c in full["checks"]})
    section = seq["sequential"]
    assert section["stop_reason"] == "every gate decided"
    assert section["calls_full"] == CASES
    assert section["calls_made"] < CASES
    assert 0 < seq_requests < full_requests
