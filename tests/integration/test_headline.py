"""Every view of a stored run leads with the same headline: the verdict and the failing gates
(PRODUCT §4, "Headlines"), on the refund example with its order-sensitive backend."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.paths import ROOT

EXPECTED = "FAIL 2/18: max_ece 0.1751 > 0.15; option_order.max_violation_rate 0.8182 > 0"


def test_text_json_markdown_html_and_junit_lead_with_the_failing_gates(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("r.json", "r.md", "r.html", "r.xml")}
    code, out, _ = run_cli(
        "test", "--all", str(ROOT / "contracts" / "refund" / "decflow.yaml"),
        "-b", "order_sensitive",
        "-o", str(files["r.json"]), "--markdown", str(files["r.md"]),
        "--html", str(files["r.html"]), "--junit", str(files["r.xml"]),
    )
    assert code == 1
    assert out.splitlines()[0] == EXPECTED
    report = json.loads(files["r.json"].read_text())
    assert report["headline"] == EXPECTED and report["report_version"] == "decflow/4"
    keys = list(report)
    assert keys.index("headline") == keys.index("exit_code") + 1
    markdown_first = files["r.md"].read_text().splitlines()[0]
    assert markdown_first == "**" + EXPECTED.replace("_", "\\_").replace(">", "&gt;") + "**"
    html = files["r.html"].read_text()
    assert f"<title>{EXPECTED.replace('>', '&gt;')} · " in html
    assert f'<p class="headline">{EXPECTED.replace(">", "&gt;")}</p>' in html
    assert f'name="message" value="{EXPECTED.replace(">", "&gt;")}"' in files["r.xml"].read_text()
