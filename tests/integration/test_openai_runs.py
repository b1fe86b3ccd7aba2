"""Whole `decflow test --all` runs with the `openai` backend against the fake server: the
readout is planned once per run from every presentation, stored with the run, used by every
call and shown in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.integration.test_backend_openai import COMPLETION_PATHS, SMOLLM2_VOCAB
from tests.support.cli import run_cli
from tests.support.servers.fake_openai import FakeOpenAI

CASES = [
    {"id": "c1", "input": "The parcel arrived broken.", "expected": "replace"},
    {"id": "c2", "input": "I want my money back.", "expected": "refund"},
    {"id": "c3", "input": "Returned after 200 days.", "expected": "reject"},
]


def contract(folder: Path, url: str, properties: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    document = {
        "schema_version": "0.1",
        "decision": {"name": "returns", "type": "choice",
                     "options": ["refund", "replace", "reject"],
                     "description": "What should we do with this return?"},
        "backend": {"provider": "openai", "url": url, "model": "smollm2-135m"},
        "dataset": "cases.jsonl",
        "properties": properties,
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_collision_only_in_transformed_cases_stops_the_run_before_any_call(
    tmp_path: Path,
) -> None:
    fake = FakeOpenAI({"re": 1.0}, tokenizer="llama-cpp-python", vocab=SMOLLM2_VOCAB)
    with fake.serve() as server:
        path = contract(tmp_path / "c", server.url("/v1"),
                        {"label_format": {"styles": ["upper"], "max_tv_distance": 0.05}})
        code, _, err = run_cli("test", "--all", str(path), "--store", str(tmp_path / "store"))
    assert code == 2, err
    assert "'REPLACE' and 'REJECT' (both start with 'RE')" in err
    assert "readout: sequence" in err and "options_as: letters" in err
    assert not [r for r in server.requests if r.path in COMPLETION_PATHS]


def test_the_plan_is_made_once_and_reported(tmp_path: Path) -> None:
    fake = FakeOpenAI({"re": 0.5, "ref": 0.3, "replace": 0.2, "B": 0.1},
                      tokenizer="llama-cpp-python", vocab=SMOLLM2_VOCAB)
    store = tmp_path / "store"
    with fake.serve() as server:
        path = contract(tmp_path / "c", server.url("/v1"), {
            "option_order": {"samples": 2, "max_tv_distance": 0.05},
            "label_format": {"styles": ["lettered"], "max_tv_distance": 0.05},
        })
        code, _, err = run_cli("test", "--all", str(path), "--store", str(store),
                               "-o", str(tmp_path / "report.json"))
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == report["exit_code"], err
    assert report["metrics"]["counts"]["errored"] == 0
    paths = [r.path for r in server.requests]
    first_call = next(i for i, p in enumerate(paths) if p in COMPLETION_PATHS)
    # the tokenizer was asked before the first call, and never again by any shard
    assert any("tokenize" in p for p in paths[:first_call])
    assert all("tokenize" not in p for p in paths[first_call:])
    details = report["backend"]["details"]
    assert details["readout"] == "logprobs" and details["rule"] == "first_pieces"
    assert details["tokenizer"]["endpoint"] == server.url("/extras/tokenize")
    # one table for the permutations, one for the lettered labels
    assert sorted(sorted(t["labels"]) for t in details["first_pieces"]) == [
        ["A) refund", "B) replace", "C) reject"], ["refund", "reject", "replace"]]
    (run_id,) = [p.name for p in (store / "runs").iterdir()]
    stored = json.loads((store / "runs" / run_id / "backend-plan.json").read_text())
    assert stored["first_pieces"] == details["first_pieces"]
    for item in report["results"]:
        assert item["result"]["metadata"]["label_mass"] == 1.0  # "B" is no label's piece


def test_a_cached_sequence_run_counts_the_plans_probes_as_sent(tmp_path: Path) -> None:
    # the echo check and the scoring choice are completions the model answers, paid like
    # the run's own requests, and sent again by a run whose answers all come from the cache
    answers = {" refund": [(" ref", -1.0), ("und", -0.1)], " replace": [(" replace", -2.0)],
               " reject": [(" re", -1.5), ("ject", -0.2)]}
    store = tmp_path / "store"
    with FakeOpenAI({"The": 0.5, " I": 0.2}, answers=answers).serve() as server:
        path = contract(tmp_path / "c", server.url("/v1"), {})
        document = yaml.safe_load(path.read_text())
        document["backend"].update(api="completions", readout="sequence")
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        reports = []
        for i in range(2):
            before = len(server.requests)
            out = tmp_path / f"report-{i}.json"
            code, _, err = run_cli("test", str(path), "--store", str(store),
                                   "--call-cache", "read-write", "-o", str(out))
            assert code in (0, 1), err
            sent = sum(r.path in COMPLETION_PATHS for r in server.requests[before:])
            reports.append((json.loads(out.read_text())["call_cache"], sent))
    (first, sent_first), (second, probes) = reports
    # a case's request is one scoring completion per label; the second run sent only probes
    assert probes > 0 and sent_first == probes + 3 * len(CASES)
    assert first["requests_sent"] == len(CASES) + probes
    assert second["requests_sent"] == probes and second["served_from_cache"] == len(CASES)
