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
    assert text.startswith(render_markdown(report))
    assert "file:" not in text
    html = rendered(text)
    stored = html.split("<h2>Stored</h2>", 1)[1]
    assert f"<td>{local}</td>" in stored  # named, not linked
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
    html = rendered(render_markdown(diff))
    identity = html.split("</table>", 1)[0]
    head = [text_of(h) for h in re.findall(r"<th>(.*?)</th>", identity)]
    assert head[1:] == ["baseline", "candidate"]
    rows = {text_of(cells[0]): [text_of(c) for c in cells[1:]] for cells in (
        re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", identity,
                                                             flags=re.S)) if cells}
    assert rows["run"] == [f"run {baseline['run']['id']}", f"run {candidate['run']['id']}"]
    assert rows["contract"] == [short_hash(baseline["contract"]["hash"]),
                                short_hash(candidate["contract"]["hash"])]
    assert "n/a" not in rows["contract"]


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
