"""Attacks on the store and the views, through the command line (issue 31, part B).

Each table row is one attack or first-hour mistake and its documented outcome: the exit
code, at most one `error:` line and no traceback, and nothing outside the store touched
(a sentinel folder beside the store must survive every command).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decflow.views.artifacts import report_artifact
from tests.support.cli import run_cli

# ESC/BEL (an OSC title), a C1 CSI, bidi override and isolate, a line separator.
HOSTILE = "refund \x1b]0;pwned\x07 \x9b31m \u202egnp.exe \u2066isolate\u2069 \u2028end"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069", "\u2028")

CONTRACT = """\
schema_version: "0.1"
decision: {{name: refund_request, type: choice, options: [refund, reject, review]}}
dataset: {dataset}
backend:
  provider: mock
  model: {model}
  position_bias: 0.3
  rules:
    - {{contains: refund, probabilities: {{refund: 0.2, reject: 0.7, review: 0.1}}}}
requirements: {{min_accuracy: 0.9}}
properties:
  option_order: {{max_tv_distance: 0.01}}
"""


def write_contract(folder: Path, *, model: str = "base", name: str = "c.yaml",
                   dataset: str = "cases.jsonl") -> Path:
    cases = [{"id": "c1", "input": HOSTILE, "expected": "refund"},
             {"id": "c2", "input": {"text": HOSTILE}, "expected": "refund"}]
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    path = folder / name
    path.write_text(CONTRACT.format(model=json.dumps(model), dataset=dataset))
    return path


def assert_one_error(code: int, err: str, expected_code: int = 2) -> str:
    """Exit `expected_code`, exactly one `error:` line on stderr and no traceback; returns
    the line."""
    assert code == expected_code, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Error:" not in err.replace("error:", ""), err  # no typer box either
    return lines[0]


# -- views: control and bidi characters shown escaped in every format ---------------------

VIEW_FILES = ("--html", "--markdown", "--junit")


@pytest.fixture(scope="module")
def hostile_views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every view of a failing run whose inputs and backend model are hostile text."""
    folder = tmp_path_factory.mktemp("views")
    contract = write_contract(folder, model=HOSTILE)
    store = folder / "store"
    files = {option: folder / f"view{option[1:]}" for option in VIEW_FILES}
    code, out, err = run_cli("test", "--all", str(contract), "--store", str(store),
                             *[str(part) for option, path in files.items()
                               for part in (option, path)])
    assert code == 1, err
    views = {option: path.read_text() for option, path in files.items()}
    (run_dir,) = (store / "runs").iterdir()
    views["stored report.html"] = (run_dir / "report.html").read_text()
    report = json.loads((run_dir / "report.json").read_text())
    views["Prefect artifact"] = report_artifact(report, {"report.json": HOSTILE})
    views["terminal"] = out
    return views


@pytest.mark.parametrize("view", [*VIEW_FILES, "stored report.html", "Prefect artifact",
                                  "terminal"])
def test_views_show_control_and_bidi_characters_escaped(hostile_views: dict[str, str],
                                                        view: str) -> None:
    text = hostile_views[view]
    assert [char for char in RAW if char in text] == []
    # Still visible, as escapes (Markdown doubles the backslash in its source).
    if view != "--junit":  # JUnit has no case inputs, only the model in its properties
        assert "\\u202egnp.exe" in text.replace("\\\\", "\\")
    assert "\\u2066isolate\\u2069" in text.replace("\\\\", "\\")
