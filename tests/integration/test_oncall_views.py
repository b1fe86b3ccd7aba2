"""What an on-call reader needs first, in every view of a diff and a check: the checks and
changed cases before the counts behind them, failing segments first, identity rows as short
text (never a raw structure or `None`, never "n/a cases" for a check)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from decflow.gates.headline import number
from decflow.views.html import render_html
from decflow.views.markdown import render_markdown
from decflow.views.outputs import render_text
from tests.support.cli import run_cli
from tests.support.paths import ROOT

REFUND = ROOT / "contracts" / "refund"


@pytest.fixture(scope="module")
def diff(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The refund run on its default backend against a changed model: damaged items are now
    rejected, so answers flip and the diff FAILs."""
    import yaml

    folder = tmp_path_factory.mktemp("diff")
    document = yaml.safe_load((REFUND / "decflow.yaml").read_text())
    document["backend"]["rules"][0]["probabilities"] = {"refund": 0.02, "reject": 0.95,
                                                        "review": 0.03}
    shutil.copy(REFUND / "cases.jsonl", folder / "cases.jsonl")  # beside the contract
    changed = folder / "changed.yaml"
    changed.write_text(yaml.safe_dump(document, sort_keys=False))
    for name, contract in (("a", REFUND / "decflow.yaml"), ("b", changed)):
        run_cli("test", str(contract), "--store", str(folder / "store"), "-o",
                str(folder / f"{name}.json"))
    code, _, err = run_cli("diff", str(folder / "a.json"), str(folder / "b.json"), "-c",
                           str(REFUND / "decflow.yaml"), "-o", str(folder / "d.json"))
    assert code == 1, err
    found: dict[str, Any] = json.loads((folder / "d.json").read_text())
    return found


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("check")
    code, _, err = run_cli("check", str(REFUND / "decflow.yaml"), "-d",
                           str(REFUND / "production.jsonl"), "--baseline",
                           str(REFUND / "production-baseline.jsonl"), "--store",
                           str(folder / "store"), "-o", str(folder / "c.json"))
    assert code == 0, err
    found: dict[str, Any] = json.loads((folder / "c.json").read_text())
    return found


def positions(text: str, *markers: str) -> list[int]:
    return [text.index(marker) for marker in markers]


def test_a_diff_leads_with_its_checks_and_changed_cases(diff: dict[str, Any]) -> None:
    assert diff["status"] == "fail" and diff["changes"]
    markdown = render_markdown(diff)
    order = positions(markdown, "## Checks", "## Changed cases", "## Counts", "## Shift",
                      "## Metrics")
    assert order == sorted(order)
    first = diff["changes"][0]
    changed = markdown.split("## Changed cases", 1)[1].split("## Counts", 1)[0]
    assert f"({len(diff['changes'])} of {len(diff['changes'])})" in changed
    assert f"| {first['case_id']} |" in changed
    text = render_text(diff)
    order = positions(text, "  Checks", "  Changes (", "  Cases ", "  Metric ")
    assert order == sorted(order)
    html = render_html(diff)
    order = positions(html, "<h2>Gates", "<h2>Changed cases", "<h2>Shift", "<h2>Metrics")
    assert order == sorted(order)


def test_a_diff_names_its_two_runs_in_short_text(diff: dict[str, Any]) -> None:
    from decflow.views.text import short_hash

    html = render_html(diff)
    identity = html.split("<h2>Identity</h2>", 1)[1].split("</section>", 1)[0]
    assert "{" not in identity and "None" not in identity
    assert "<th>baseline</th><th>candidate</th>" in identity
    assert short_hash(diff["baseline"]["contract_hash"]) in identity
    assert diff["baseline"]["contract_hash"] not in identity  # shortened
    assert "11 cases, 10 labeled" in identity
    assert "Gates: the contract " in identity


def test_a_check_names_its_records_and_baseline_and_leads_with_its_checks(
    check: dict[str, Any],
) -> None:
    markdown = render_markdown(check)
    identity = markdown.split("## Checks", 1)[0]
    assert "n/a" not in identity and "None" not in identity
    assert "- **records**: " in identity and " · 4 records · sha256:" in identity
    assert "- **baseline**: dataset · " in identity and "production-baseline.jsonl" in identity
    order = positions(markdown, "## Checks", "## Metrics", "## Drift against the baseline",
                      "## Segments")
    assert order == sorted(order)
    html = render_html(check)
    identity = html.split("<h2>Identity</h2>", 1)[1].split("</section>", 1)[0]
    assert "{" not in identity and "None" not in identity and "n/a" not in identity
    assert "production-baseline.jsonl · 4 records" in identity


def test_failing_segments_come_first_in_every_view(check: dict[str, Any]) -> None:
    report = copy.deepcopy(check)
    first, second = report["segments"]
    assert (first["value"], second["value"]) == ("en", "it")
    second["status"] = "fail"
    text = render_text(report)
    assert text.index("FAIL locale=it") < text.index("PASS locale=en")
    markdown = render_markdown(report).split("## Segments", 1)[1]
    assert markdown.index("locale=it") < markdown.index("locale=en")
    html = render_html(report).split("<h2>Segments</h2>", 1)[1]
    assert html.index("locale=it") < html.index("locale=en")


RAW_KEY = re.compile(r"<(?:td|h3)>([a-z]+(?:_[a-z0-9]+)+)</(?:td|h3)>")


def raw_keys(html: str, report: dict[str, Any]) -> list[str]:
    """Cells and headings showing a report key, not words (gate names stay as written)."""
    gates = {c["gate"] for c in report["checks"]}
    return [key for key in RAW_KEY.findall(html) if key not in gates]


def test_a_sequential_run_reads_in_words_with_intervals_and_numbers_as_elsewhere(
    tmp_path: Path,
) -> None:
    from tests.support.planted import planted_contract

    contract = planted_contract(tmp_path / "suite", 1000, wrong=0.03, flips=0.005)
    code, _, err = run_cli("test", str(contract), "--all", "--sequential", "--batch", "8",
                           "--store", str(tmp_path / "store"), "-o", str(tmp_path / "s.json"))
    assert code == 0, err
    report = json.loads((tmp_path / "s.json").read_text())
    section = report["sequential"]
    assert section["money_saved"] is None  # no price per call
    html = render_html(report).split("<h2>Sequential run</h2>", 1)[1].split("</section>")[0]
    assert not raw_keys(html, report)
    assert f"<td>backend calls sent</td><td class=\"n\">{section['calls_made']}</td>" in html
    assert "money saved" not in html and "n/a" not in html
    assert not re.search(r"\de[+-]\d", html)  # powers of ten as ×10ⁿ
    assert "×10" in html
    for gate in section["gates"]:
        if gate["low"] is not None and gate["high"] is not None:
            assert f"[{number(gate['low'])}, {number(gate['high'])}]" in html


def test_a_check_reads_in_words(check: dict[str, Any]) -> None:
    html = render_html(check)
    assert not raw_keys(html, check)
    assert "<td>with a correctness label</td>" in html
    assert "<h3>latency (ms)</h3>" in html


def test_the_trend_grows_down_not_sideways(diff: dict[str, Any]) -> None:
    """A run with many gates adds rows to the diff's trend table, not columns: the HTML
    stays as wide as the runs it shows (at most `pipeline.trend.DEFAULT_LAST`)."""
    report = copy.deepcopy(diff)
    gates = [f"property_{i}.max_violation_rate" for i in range(30)]
    cell = {"value": 0.5, "low": None, "high": 0.7, "status": "pass", "threshold": 0.8}
    report["trend"] = {"decision": "refund_request", "backend": "default", "gates": gates,
                       "runs": [{"run_id": f"20261201-00000{i}-abcdef", "created_at": "",
                                 "backend": "default", "status": "pass", "accepted": i == 0,
                                 "diffed_against": None, "gates": dict.fromkeys(gates, cell)}
                                for i in range(3)]}
    trend = render_html(report).split("<h2>Trend</h2>", 1)[1].split("</table>", 1)[0]
    head, body = trend.split("</thead>", 1)
    assert head.count("<th>") == 1 + 3
    assert body.count("<tr>") == 30
    assert "0.5<br>≤ 0.7<br>PASS" in body and "n/a" not in body
