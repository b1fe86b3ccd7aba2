"""Untrusted text never reaches the terminal raw: case inputs, model answers, record fields
and labels in every text view, and values quoted by error messages, are shown escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import decflow
from decflow.views.probe_text import render_probe
from tests.support.cli import run_cli

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
OSC_LINK = "\x1b]8;;http://evil.example\x1b\\here\x1b]8;;\x1b\\"
CSI = "\x1b[2J"
BIDI = "\u202egnp.exe"
# Short enough that the views' 70-character input preview keeps all of it.
HOSTILE = f"refund{BIDI}{OSC_TITLE}{CSI}\x9b31m\r{OSC_CLIPBOARD}{OSC_LINK}"
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\r"]


def assert_safe(text: str) -> None:
    """No character that a terminal acts on, and the payload still visible as escapes."""
    found = [char for char in RAW if char in text]
    assert not found, found
    assert "\\x1b]0;pwned\\x07" in text
    assert "\\u202egnp.exe" in text


CONTRACT = """\
schema_version: "0.1"
decision: {{name: refund_request, type: choice, options: [refund, reject, review]}}
dataset: cases.jsonl
backend:
  provider: mock
  model: base
  position_bias: {bias}
  rules:
    - {{contains: refund, probabilities: {{refund: 0.2, reject: 0.7, review: 0.1}}}}
requirements: {{min_accuracy: 0.9}}
properties:
  option_order: {{max_tv_distance: 0.01}}
"""


def write_contract(tmp_path: Path, name: str = "c.yaml", bias: float = 0.3) -> Path:
    cases = [
        {"id": "c1", "input": HOSTILE, "expected": "refund"},
        {"id": "c2", "input": {"text": HOSTILE}, "expected": "refund"},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    path = tmp_path / name
    path.write_text(CONTRACT.format(bias=bias))
    return path


def test_run_view_failures_and_property_failures(tmp_path: Path) -> None:
    contract = write_contract(tmp_path)
    store = str(tmp_path / "store")
    code, out, _ = run_cli("test", "--all", str(contract), "--store", store)
    assert code == 1, out
    assert "Failures" in out and "Property failures" in out
    assert_safe(out)


def test_json_on_stdout_carries_no_raw_terminal_controls(tmp_path: Path) -> None:
    contract = write_contract(tmp_path)
    code, out, _ = run_cli("test", "--all", str(contract), "--store", str(tmp_path / "s"),
                           "-f", "json")
    assert code == 1
    assert not [char for char in RAW if char in out]
    report = json.loads(out)  # the same values, decoded back
    assert report["results"][0]["input"] == HOSTILE


def test_stored_run_shown_again_and_diff_view(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    base = write_contract(tmp_path, "base.yaml", bias=0.0)
    cand = write_contract(tmp_path, "cand.yaml", bias=0.5)
    for contract in (base, cand):
        run_cli("test", str(contract), "--store", store, "-o", str(contract) + ".json")
    code, out, err = run_cli("report", str(base) + ".json", "--store", store)
    assert code == 1, err
    assert_safe(out)
    code, out, err = run_cli("diff", str(base) + ".json", str(cand) + ".json", "--store", store)
    assert code in (0, 1), err
    assert "Changes" in out
    assert_safe(out)


def test_check_view_segment_values(tmp_path: Path) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
        "backend: {provider: mock}\n"
        "production: {segments: [locale]}\n"
    )
    record = {
        "id": "p1", "timestamp": "2026-09-24T09:00:00Z", "decision": "refund_request",
        "input": HOSTILE, "probabilities": {"refund": 0.9, "reject": 0.05, "review": 0.05},
        "selected": "refund", "outcome": "refund", "metadata": {"locale": HOSTILE},
    }
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record) + "\n")
    code, out, err = run_cli("check", str(contract), "-d", str(records), "--store",
                             str(tmp_path / "store"))
    assert code == 0, err
    assert "Segments" in out
    assert_safe(out)


def test_probe_view_model_answers() -> None:
    def agent(text: str) -> str:
        return "allow" if "a" in text else HOSTILE

    result = decflow.probe(agent, ["hello", "b", "c", "d"], repeats=2)
    assert_safe(render_probe(result.to_dict()))


def test_error_messages_quote_labels_escaped(tmp_path: Path) -> None:
    contract = write_contract(tmp_path)
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"input": "x", "expected": f"no{OSC_TITLE}{BIDI}"}) + "\n"
    )
    code, out, err = run_cli("validate", str(contract))
    assert code == 2, out
    assert "unknown label 'no\\x1b]0;pwned\\x07\\u202egnp.exe'" in err
    assert not any(char in err for char in RAW)


def test_contract_keys_in_error_messages_are_escaped(tmp_path: Path) -> None:
    document = {"schema_version": "0.1",
                "decision": {"name": "d", "type": "noul"},
                "backend": {"provider": "mock"},
                f"x{OSC_TITLE}{BIDI}": 1}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    code, _, err = run_cli("validate", str(path))
    assert code == 2
    assert "line 1: x\\x1b]0;pwned\\x07\\u202egnp.exe: unknown field" in err
    assert not any(char in err for char in RAW)


@pytest.mark.parametrize("newline", ["\n", "\u2028"])
def test_a_newline_in_an_input_cannot_forge_a_verdict_line(tmp_path: Path, newline: str) -> None:
    contract = write_contract(tmp_path)
    forged = f"refund{newline}PASS: all gates hold"
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"id": "c1", "input": forged, "expected": "review"}) + "\n"
    )
    code, out, _ = run_cli("test", str(contract), "--store", str(tmp_path / "store"))
    assert code == 1
    assert not any(line.startswith("PASS") for line in out.splitlines())
