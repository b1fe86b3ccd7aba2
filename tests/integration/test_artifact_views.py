"""What the Prefect UI shows of a report, rendered as the UI renders it (Markdown, table
cells included), and the HTML view every stored run keeps beside its report.

Expected cell text comes from the reports fed in: DecGuard 0.1.1's own check messages
(which print values to 4 significant digits) and the stored runs' own identities.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from decflow.views.artifacts import check_rows, linkable, report_artifact
from decflow.views.html import render_html
from decflow.views.markdown import render_markdown
from decflow.views.text import short_hash
from tests.support.cli import run_cli
from tests.support.paths import ROOT, VECTORS

REFUND = ROOT / "contracts" / "refund"
WORDS = {">=": "at least", "<=": "at most", "<": "below"}


def rendered(markdown: str) -> str:
    """HTML as a Markdown renderer with GFM tables (like the Prefect UI's) makes it."""
    return str(MarkdownIt("commonmark").enable("table").render(markdown))


def text_of(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html)).strip()


def golden(name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((VECTORS / name).read_text())
    return {"report_version": "decflow/1", **report}


def test_checks_table_cells_read_as_text() -> None:
    report = golden("golden-refund-test-default.json")
    rows = check_rows(report)
    assert len(rows) == len(report["checks"])
    for row, check in zip(rows, report["checks"], strict=True):
        html = {column: rendered(text) for column, text in row.items()}
        assert not any("<blockquote>" in h for h in html.values()), row
        shown = {column: text_of(h) for column, h in html.items()}
        # DecGuard's message: "<metric> <value, 4 significant digits> <op> <threshold>"
        metric, value, op, threshold = check["message"].split()
        assert shown["gate"].startswith(check["gate"])
        assert shown["metric"] == metric
        assert shown["comparison"] == WORDS[op]
        assert (shown["value"], shown["threshold"]) == (value, threshold)
        assert shown["message"] == check["message"]
        assert shown["status"] == check["status"].upper()
    ece = next(r for r in rows if r["gate"].startswith("max\\_ece"))
    assert ece["value"] == "0.139"  # stored as 0.13899999999999998


def test_markdown_report_has_its_checks_table() -> None:
    report = golden("golden-refund-test-default.json")
    report["contract"] = {"name": "refund_request", "type": "choice", "path": "decflow.yaml",
                          "hash": "sha256:" + "ab" * 32}
    html = rendered(render_markdown(report))
    checks = html.split("<h2>Checks: 5 of 5 hold</h2>", 1)[1]
    table = checks.split("</table>", 1)[0]
    head = [text_of(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    assert head == ["status", "gate", "metric", "comparison", "threshold", "value", "message"]
    body = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], flags=re.S)
    assert [text_of(re.findall(r"<td>(.*?)</td>", r)[1]) for r in body] == [
        "min_accuracy", "max_ece", "min_coverage", "max_error_rate",
        "max_latency_p95_ms (warning)"]
    assert "<blockquote>" not in html


def test_report_artifact_names_a_local_store_by_path_and_links_urls() -> None:
    report = golden("golden-refund-test-default.json")
    local = "/srv/decflow/store/runs/20260101-000000-abcdef/report.json"
    remote = "s3://bucket/decflow/runs/20260101-000000-abcdef/report.html"
    text = report_artifact(report, {"report.json": local, "report.html": remote})
    assert "file:" not in text
    html = rendered(text)
    stored = html.split("<h2>Stored</h2>", 1)[1].split("<h2>", 1)[0]
    assert f"<li>report.json: {local}</li>" in stored  # named, not linked
    assert f'<a href="{remote}">{remote}</a>' in stored
    assert not linkable(local) and not linkable("file:///tmp/x") and linkable(remote)
    assert linkable("https://example.org/report.html")


def test_diff_markdown_names_both_runs_and_their_contract_hashes(tmp_path: Path) -> None:
    from decflow import sdk

    shutil.copytree(REFUND, tmp_path / "refund")
    store = str(tmp_path / "store")
    contract = str(tmp_path / "refund" / "decflow.yaml")
    baseline = sdk.run_test(contract, store=store)
    candidate = sdk.run_test(contract, backend="order_sensitive", store=store)
    diff = sdk.run_diff(baseline["run"]["id"], candidate["run"]["id"], store=store)
    rows = diff_identity_items(rendered(render_markdown(diff)))
    assert rows["run"] == (f"baseline run {baseline['run']['id']}; "
                           f"candidate run {candidate['run']['id']}")
    assert rows["contract"] == f"both {short_hash(baseline['contract']['hash'])}"
    assert baseline["contract"]["hash"] == candidate["contract"]["hash"]


def diff_identity_items(html: str) -> dict[str, str]:
    """The items of a diff Markdown's identity list: `{name: text}`."""
    identity = html.split("<h2>Identity</h2>", 1)[1].split("</ul>", 1)[0]
    return dict(text_of(item).split(": ", 1)
                for item in re.findall(r"<li>(.*?)</li>", identity, flags=re.S))


def test_direct_runs_store_report_html_beside_report_json(tmp_path: Path) -> None:
    from decflow import sdk

    shutil.copytree(REFUND, tmp_path / "refund")
    store = tmp_path / "store"
    contract = str(tmp_path / "refund" / "decflow.yaml")
    direct = ("import sys\n"
              "from decflow.cli import invoke\n"
              "code = invoke(['test', sys.argv[1], '--no-prefect', '--store', sys.argv[2]])\n"
              "assert 'prefect' not in sys.modules, 'the direct path imported prefect'\n"
              "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", direct, contract, str(store)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    code, _, err = run_cli("check", contract, "-d", str(tmp_path / "refund" / "production.jsonl"),
                           "--no-prefect", "--store", str(store), "-f", "json")
    assert code in (0, 1), err
    sdk.run_test(contract, store=str(store), mode="all")
    runs = sorted(p for p in (store / "runs").iterdir())
    assert len(runs) == 3
    for run in runs:
        report = json.loads((run / "report.json").read_text())
        assert (run / "report.html").read_text() == render_html(report), run.name


def test_every_gate_comparison_has_a_word() -> None:
    from typing import get_args

    from decflow.gates.checks import Comparison

    assert set(get_args(Comparison)) == set(WORDS)
    for comparison, word in WORDS.items():
        (row,) = check_rows({"checks": [{
            "gate": "g", "level": "requirement", "metric": "m", "comparison": comparison,
            "threshold": 1.0, "value": None, "status": "fail",
            "message": "m could not be computed"}]})
        assert row["comparison"] == word and row["value"] == "n/a"


def tables_of(html: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each table of rendered Markdown: its header cells and its rows' cells, as text."""
    found = []
    for body in re.findall(r"<table>(.*?)</table>", html, flags=re.S):
        head = [text_of(h) for h in re.findall(r"<th>(.*?)</th>", body, flags=re.S)]
        rows = [[text_of(c) for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
                for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[-1],
                                      flags=re.S)]
        found.append((head, [r for r in rows if r]))
    return found


# The Prefect UI shows artifact tables unwrapped in a column about 860 px wide at a 1,440 px
# window (docs/oncall-markdown-artifact.png): about 100 characters of 14 px text, less
# about 4 per cell of padding.
ROW_BUDGET = 100
CELL_PADDING = 4


def fits(cells: list[str]) -> bool:
    return sum(len(c) + CELL_PADDING for c in cells) <= ROW_BUDGET


@pytest.fixture(scope="module")
def refund_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """A failing run (position-biased backend), a diff against it and a production check."""
    from decflow import sdk

    folder = tmp_path_factory.mktemp("artifact-reports")
    shutil.copytree(REFUND, folder / "refund")
    store = str(folder / "store")
    contract = str(folder / "refund" / "decflow.yaml")
    base = sdk.run_test(contract, store=store, mode="all")
    run = sdk.run_test(contract, backend="order_sensitive", store=store, mode="all")
    diff = sdk.run_diff(base["run"]["id"], run["run"]["id"], store=store)
    code, out, err = run_cli("check", contract, "-d",
                             str(folder / "refund" / "production-drift.jsonl"), "--baseline",
                             str(folder / "refund" / "production.jsonl"), "--no-prefect",
                             "--store", store, "-f", "json")
    assert code == 1, err
    return {"run": run, "diff": diff, "check": json.loads(out)}


@pytest.mark.parametrize("kind", ["run", "diff", "check"])
def test_the_report_artifact_leads_with_failing_gates_and_fits_the_prefect_ui(
    refund_reports: dict[str, dict[str, Any]], kind: str
) -> None:
    """No repeated headline (the artifact's description and the state message carry it),
    no empty header row, every table row short enough not to be clipped."""
    from decflow.report.sections import report_headline

    report = refund_reports[kind]
    assert report["status"] == "fail"
    text = report_artifact(report, {"report.json": "/store/runs/r/report.json",
                                    "report.html": "/store/runs/r/report.html"})
    assert report_headline(report) not in text.replace("\\", "")
    html = rendered(text)
    assert html.index("<h2>Failing gates: ") < html.index("<h2>Stored</h2>") < html.index(
        "<h2>Gates: ")
    tables = tables_of(html)
    assert tables
    for head, rows in tables:
        assert any(head), head  # no empty header row
        for row in [head, *rows]:
            assert fits(row), row
    failing = [c for c in report["checks"] if c["status"] != "pass"]
    headings = [text_of(h) for h in re.findall(r"<h3>(.*?)</h3>", html)]
    assert len(headings) == len(failing)
    assert all(h.split()[0] in ("FAIL", "WARN") for h in headings)
    target = (f"{report['run']['id']} --store" if "run" in report
              else "/store/runs/r/report.json")
    assert f"`decflow report {target}" in text and "--html report.html`" in text


def test_a_40_failure_run_lists_every_failing_case_under_its_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every failing case of a gate, up to the limit; past it, a count and where they all
    are."""
    from decflow import sdk
    from decflow.views import artifacts
    from tests.support.planted import WRONG, planted_contract

    contract = planted_contract(tmp_path / "suite", 100, wrong=0.4, flips=0.0)
    report = sdk.run_test(str(contract), store=str(tmp_path / "store"))
    assert report["status"] == "fail"
    wrong = {json.loads(line)["id"] for line in (tmp_path / "suite" / "cases.jsonl").open()
             if WRONG in json.loads(line)["input"]}
    assert len(wrong) == 40
    where = str(tmp_path / "store" / "runs" / report["run"]["id"] / "report.json")

    def listed(text: str) -> list[str]:
        html = rendered(text)
        gate = html.split("<h3>FAIL min_accuracy", 1)[1].split("<h2>", 1)[0]
        return [text_of(item) for item in re.findall(r"<li>(.*?)</li>", gate, flags=re.S)]

    items = listed(report_artifact(report, {"report.json": where}))
    assert {item.split(":", 1)[0] for item in items} == wrong
    assert all(": expected good, selected bad (0." in item for item in items)
    monkeypatch.setattr(artifacts, "MAX_CASES_PER_GATE", 25)
    items = listed(report_artifact(report, {"report.json": where}))
    assert len(items) == 26
    assert items[-1] == f"… and 15 more: every one is in failures of {where}"
