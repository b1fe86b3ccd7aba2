"""The call cache against the real llama.cpp server (llama-cpp-python) on 127.0.0.1: a
second identical run sends no completion request; the same configured model name served
from another model file (SmolLM2, then Gemma 3 270M on the same port) is another identity,
so every request is sent again; the report says the identity is unverified (the server
names its model by the file's path only). Requests are counted in the server's own log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.llm_server import LlamaServer, gemma_gguf, smollm2_gguf

pytestmark = pytest.mark.llm

CASES = ["The parcel arrived broken.", "I want my money back.", "It came 200 days late."]


def contract(folder: Path, url: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": text}) + "\n" for i, text in enumerate(CASES)))
    document = {
        "schema_version": "0.1",
        "decision": {"name": "sentiment", "type": "choice",
                     "options": ["positive", "negative", "neutral"],
                     "description": "The sentiment of the customer's message."},
        # one configured name whatever file the server loaded
        "backend": {"provider": "openai", "url": url, "model": "house-model",
                    "api": "completions"},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": 1, "call_cache": "read-write"},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def completions(server: LlamaServer) -> int:
    return server.requests("/v1/completions")


def run(path: Path, store: Path, out: Path) -> dict[str, Any]:
    code, _, err = run_cli("test", str(path), "--store", str(store), "-o", str(out))
    assert code in (0, 1), err
    return json.loads(out.read_text())


def test_the_cache_follows_the_model_file_behind_one_name(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with LlamaServer(smollm2_gguf()) as smol:
        path = contract(tmp_path / "c", smol.url)
        first = run(path, store, tmp_path / "first.json")
        sent = completions(smol)
        assert sent >= len(CASES) and first["call_cache"]["requests_sent"] == len(CASES)
        second = run(path, store, tmp_path / "second.json")
        assert completions(smol) == sent  # nothing asked
        assert second["call_cache"]["served_from_cache"] == len(CASES)
        assert [r["result"]["probabilities"] for r in second["results"]] == [
            r["result"]["probabilities"] for r in first["results"]]
        port = smol.port
    identity = second["call_cache"]["model_identity"]
    assert not identity["verified"] and identity["note"].startswith("unverified")
    assert identity["reported"] == {"id": str(smollm2_gguf())}
    with LlamaServer(gemma_gguf(), port=port) as gemma:
        third = run(path, store, tmp_path / "third.json")
        assert completions(gemma) >= len(CASES)
    assert third["call_cache"]["requests_sent"] == len(CASES)
    assert third["call_cache"]["served_from_cache"] == 0
    assert third["call_cache"]["model_identity"]["reported"] == {"id": str(gemma_gguf())}
