"""Extensions registered from the test suite through the same API as decflow's built-ins
(`tests.support.extensions`), run end to end by the command line; registries close before
a contract loads, so a contract's hash never depends on what was imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from decflow.contracts import PROPERTIES, PropertyEntry, load_contract
from decflow.errors import DecflowError
from tests.support.extensions import ReversedWords
from tests.support.paths import EXAMPLES, ROOT


def extended_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run([sys.executable, "-P", "-s", "-m", "tests.support.extended_cli", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False)


def spam_contract(tmp_path: Path, backend: dict[str, Any] | None = None,
                  **properties: Any) -> Path:
    """The spam example with `properties` (and `backend`, when given) replaced."""
    document = yaml.safe_load((EXAMPLES / "spam" / "decguard.yaml").read_text())
    document["properties"] = properties
    if backend is not None:
        document["backend"] = backend
    shutil.copy(EXAMPLES / "spam" / "cases.json", tmp_path / "cases.json")
    path = tmp_path / "decguard.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_registered_property_runs_like_a_built_in(tmp_path: Path) -> None:
    contract = spam_contract(tmp_path, reversed_words={"max_flip_rate": 0})
    done = extended_cli("fuzz", str(contract), "--store", str(tmp_path / "store"),
                        "-o", "report.json", cwd=tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    summary = next(s for s in report["properties"]["summaries"]
                   if s["property"] == "reversed_words")
    # "free money" read backwards is "money free": the mock's rule no longer matches
    assert summary["n_transformed"] > 0 and summary["n_flips"] >= 1
    check = next(c for c in report["checks"] if c["gate"] == "reversed_words.max_flip_rate")
    assert check["status"] == "fail" and done.returncode == 1


def test_without_the_extension_the_property_is_an_unknown_field(tmp_path: Path) -> None:
    contract = spam_contract(tmp_path, reversed_words={"max_flip_rate": 0})
    with pytest.raises(DecflowError, match=r"properties\.reversed_words: unknown field"):
        load_contract(contract)


def test_registering_after_a_contract_loaded_is_refused(tmp_path: Path) -> None:
    load_contract(spam_contract(tmp_path))
    entry = PropertyEntry("reversed_words", ReversedWords, "tests.support.extensions:X")
    with pytest.raises(DecflowError, match="registered after the property registry was read"):
        PROPERTIES.register(entry)


def test_a_contract_hashes_the_same_with_or_without_extensions(tmp_path: Path) -> None:
    contract = EXAMPLES / "spam" / "decguard.yaml"
    done = extended_cli("validate", str(contract), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert load_contract(contract).hash in done.stdout


def test_a_registered_view_format_is_an_option_of_every_report_command(tmp_path: Path) -> None:
    contract = spam_contract(tmp_path)
    store = str(tmp_path / "store")
    done = extended_cli("test", str(contract), "--store", store, "--checks-csv", "run.csv",
                        "-o", "run.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "run.json").read_text())
    rows = (tmp_path / "run.csv").read_text().splitlines()
    assert rows[0] == "gate,level,status,value,threshold"
    assert [row.split(",")[0] for row in rows[1:]] == [c["gate"] for c in report["checks"]]
    shown = extended_cli("report", report["run"]["id"], "--store", store,
                         "--checks-csv", "shown.csv", cwd=tmp_path)
    assert shown.returncode == 0 and (tmp_path / "shown.csv").read_text() == "\n".join(rows) + "\n"
    assert "--checks-csv" in extended_cli("check", "--help", cwd=tmp_path).stdout


KEYWORD_BACKEND = {"provider": "keyword", "keywords": {"winner": "spam", "free money": "spam"},
                   "otherwise": "ham"}


def test_a_registered_backend_provider_answers_a_run(tmp_path: Path) -> None:
    # label_format shows the labels as SPAM, Spam, "spam": the answer keyed by shown labels
    # is mapped back by the engine, so no presentation flips a decision
    contract = spam_contract(tmp_path, KEYWORD_BACKEND,
                             label_format={"styles": ["upper", "capitalized", "quoted"],
                                           "max_flip_rate": 0})
    done = extended_cli("test", str(contract), "--all", "--store", str(tmp_path / "store"),
                        "-o", "report.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["backend"]["provider"], report["backend"]["model"]) == ("keyword",
                                                                          "keyword-1")
    selected = {case["input"]: case["result"]["selected"] for case in report["results"]}
    keyworded = [text for text in selected
                 if "winner" in text.lower() or "free money" in text.lower()]
    assert sorted(text for text, label in selected.items() if label == "spam") == sorted(keyworded)
    # "Winner of the office raffle is Ana, congrats!" holds a keyword and is ham: 9 of 10
    assert report["metrics"]["classification"]["accuracy"] == 0.9
    summary = next(s for s in report["properties"]["summaries"]
                   if s["property"] == "label_format")
    assert summary["n_transformed"] > 0 and summary["n_flips"] == 0


def test_a_registered_provider_validates_its_settings_against_the_decision(
        tmp_path: Path) -> None:
    contract = spam_contract(tmp_path, {**KEYWORD_BACKEND, "keywords": {"winner": "junk"}})
    done = extended_cli("validate", str(contract), cwd=tmp_path)
    assert done.returncode == 2
    assert "backend.keywords" in done.stderr and "['junk'] are not contract labels" in done.stderr


def test_without_the_extension_the_provider_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(DecflowError, match=r"backend\.provider: unknown provider 'keyword'"):
        load_contract(spam_contract(tmp_path, KEYWORD_BACKEND))


# -- a golden gate registered from tests/ (`max_unsure_rate`) ---------------------------------

REFUND = ROOT / "contracts" / "refund"


def unsure_contract(tmp_path: Path, **sections: Any) -> Path:
    """The refund example with `sections` replaced, and a backend `shaky` that answers the
    "changed my mind" cases with 0.6 instead of 0.85 (the same label)."""
    document = yaml.safe_load((REFUND / "decflow.yaml").read_text())
    shaky = json.loads(json.dumps(document["backend"]))
    for rule in shaky["rules"]:
        if rule["contains"] == "changed my mind":
            rule["probabilities"] = {"refund": 0.2, "reject": 0.6, "review": 0.2}
    document["backends"] = {**document.get("backends", {}), "shaky": shaky}
    document.update(sections)
    shutil.copy(REFUND / "cases.jsonl", tmp_path / "cases.jsonl")
    path = tmp_path / "decflow.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def unsure_share(report: dict[str, Any]) -> float:
    """The share of decided cases under 0.75 confidence, read off the report's results."""
    decided = [case["result"] for case in report["results"] if case["result"] is not None]
    return sum(result["confidence"] < 0.75 for result in decided) / len(decided)


def test_a_registered_golden_gate_gates_a_run_and_a_sequential_run(tmp_path: Path) -> None:
    contract = unsure_contract(tmp_path, requirements={"min_accuracy": 0.5,
                                                       "max_unsure_rate": 0.2})
    store = str(tmp_path / "store")
    done = extended_cli("test", str(contract), "--store", store, "-o", "run.json", cwd=tmp_path)
    report = json.loads((tmp_path / "run.json").read_text())
    share = unsure_share(report)
    assert share == 3 / 11  # the three cases no rule matches answer 0.65
    assert report["metrics"]["extensions"] == {"unsure_rate": share}
    assert report["requirements"]["max_unsure_rate"] == 0.2
    check = next(c for c in report["checks"] if c["gate"] == "max_unsure_rate")
    assert (check["metric"], check["comparison"], check["status"]) == (
        "unsure_rate", "<=", "fail")
    assert check["value"] == share and done.returncode == 1
    assert report["headline"].startswith("FAIL 1/")
    # the stored report verifies and re-gates with the gate
    shown = extended_cli("report", report["run"]["id"], "--store", store, "-c", str(contract),
                         "-f", "json", cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr
    assert next(c for c in json.loads(shown.stdout)["checks"]
                if c["gate"] == "max_unsure_rate")["value"] == share

    # a sequential run tracks it case by case and stops once it is shown above its limit
    sequential = extended_cli("test", str(contract), "--store", store, "--sequential",
                              "--batch", "1", "--order-seed", "3", "-o", "seq.json",
                              cwd=tmp_path)
    assert sequential.returncode == 1, sequential.stderr
    found = json.loads((tmp_path / "seq.json").read_text())
    run = found["sequential"]
    gate = next(g for g in run["gates"] if g["gate"] == "max_unsure_rate")
    assert gate["decision"] == "fail" and gate["cases_used"] == run["cases_sent"] < 11
    assert run["stop_reason"] == "requirement max_unsure_rate shown to fail"
    assert next(c for c in found["checks"] if c["gate"] == "max_unsure_rate")["status"] == "fail"
    plan = extended_cli("test", str(contract), "--sequential", "--plan", cwd=tmp_path)
    assert plan.returncode == 0 and "max_unsure_rate" in plan.stdout


def test_a_registered_golden_gate_gates_a_diff(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    contract = unsure_contract(tmp_path, regression={"max_unsure_rate_increase": 0.1,
                                                     "gating": "point"})
    for backend, out in (("default", "before.json"), ("shaky", "after.json")):
        ran = extended_cli("test", str(contract), "-b", backend, "--store", store, "-o", out,
                           cwd=tmp_path)
        assert ran.returncode in (0, 1), ran.stderr
    before, after = (json.loads((tmp_path / name).read_text())
                     for name in ("before.json", "after.json"))
    runs = (before["run"]["id"], after["run"]["id"])
    # two more of the 11 cases answered unsure: 3/11 -> 5/11
    assert (unsure_share(before), unsure_share(after)) == (3 / 11, 5 / 11)
    done = extended_cli("diff", *runs, "-c", str(contract), "--store", store, "-f", "json",
                        cwd=tmp_path)
    diff = json.loads(done.stdout)
    assert diff["metrics"]["unsure_rate"] == {
        "baseline": 3 / 11, "candidate": 5 / 11, "delta": 5 / 11 - 3 / 11}
    check = next(c for c in diff["checks"] if c["gate"] == "max_unsure_rate_increase")
    assert (check["metric"], check["value"], check["threshold"], check["status"]) == (
        "unsure_rate_increase", 5 / 11 - 3 / 11, 0.1, "fail")
    assert done.returncode == 1 and "max_unsure_rate_increase" in diff["headline"]
    # beside the point verdict, its evidence: the two newly unsure cases as paired shares
    evidence = next(g for g in diff["evidence"]["gates"]
                    if g["gate"] == "max_unsure_rate_increase")
    assert (evidence["newly_worse"], evidence["newly_better"], evidence["n"]) == (2, 0, 11)
    assert evidence["method"].startswith("paired difference of proportions")
    assert evidence["phrase"].startswith("unsure rate +18.2 points")
    looser = unsure_contract(tmp_path, regression={"warnings": {"max_unsure_rate_increase": 0.2},
                                                   "gating": "point"})
    done = extended_cli("diff", *runs, "-c", str(looser), "--store", store, "-f", "json",
                        cwd=tmp_path)
    check = next(c for c in json.loads(done.stdout)["checks"]
                 if c["gate"] == "max_unsure_rate_increase")
    assert (check["level"], check["status"], done.returncode) == ("warning", "pass", 0)
    # evidence gating judges it by that evidence: 2 of 11 cannot show more than 0.1 either
    # way, so it is not established (WARN), with the cases that would decide it
    judged = unsure_contract(tmp_path, regression={"max_unsure_rate_increase": 0.1,
                                                   "gating": "evidence"})
    done = extended_cli("diff", *runs, "-c", str(judged), "--store", store, "-f", "json",
                        cwd=tmp_path)
    check = next(c for c in json.loads(done.stdout)["checks"]
                 if c["gate"] == "max_unsure_rate_increase")
    assert (check["status"], done.returncode) == ("not_established", 0)
    assert check["evidence"]["cases_needed"] > 11 and "[" in check["message"]


def test_without_the_extension_the_golden_gate_is_an_unknown_field(tmp_path: Path) -> None:
    contract = unsure_contract(tmp_path, requirements={"max_unsure_rate": 0.2})
    with pytest.raises(DecflowError, match=r"requirements\.max_unsure_rate: unknown field"):
        load_contract(contract)
