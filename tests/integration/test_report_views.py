"""HTML, Markdown and JUnit views of run, diff and check reports.

Expectations come from the report dict fed in (hand-built here, DecGuard 0.1.1's stored diff
and check reports, or a real run's report), never from numbers the views compute.
"""

from __future__ import annotations

import copy
import json
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from decflow.views.html import render_html
from decflow.views.junit import render_junit
from decflow.views.markdown import render_markdown
from decflow.views.words import words
from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, ROOT, VECTORS

SCRIPT = ROOT / "scripts" / "render_html_png.py"
PLANTED = "<script>alert('x')</script>"
LABELS = ["approve", "deny", "escalate"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


# -- a small, realistic run report -------------------------------------------------------


def check(gate: str, level: str, value: float | None, threshold: float, comparison: str,
          status: str, message: str) -> dict[str, Any]:
    return {"gate": gate, "level": level, "metric": gate.split("_", 1)[-1],
            "comparison": comparison, "threshold": threshold, "value": value, "status": status,
            "message": message}


def case(case_id: str, text: str, expected: str | None, probabilities: list[float] | None,
         error: str | None = None) -> dict[str, Any]:
    result = None
    if probabilities is not None:
        best = max(range(3), key=lambda i: probabilities[i])
        result = {"case_id": case_id, "labels": LABELS,
                  "probabilities": dict(zip(LABELS, probabilities, strict=True)),
                  "selected": LABELS[best], "confidence": probabilities[best]}
    return {"case_id": case_id, "input": text, "expected": expected, "metadata": {},
            "result": result, "error": {"kind": error, "message": "boom"} if error else None}


def bins(*rows: tuple[int, float | None, float | None]) -> list[dict[str, Any]]:
    edges = [(0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.0)]
    return [{"lower": lo, "upper": hi, "count": n, "mean_confidence": conf, "accuracy": acc}
            for (lo, hi), (n, conf, acc) in zip(edges, rows, strict=True)]


def run_report() -> dict[str, Any]:
    results = [
        case("c1", "Approve the loan for Ann", "approve", [0.95, 0.03, 0.02]),
        case("c2", PLANTED, "deny", [0.9, 0.05, 0.05]),
        case("c3", "Borderline | pipe", "escalate", [0.2, 0.18, 0.62]),
        case("c4", "Unclear", "deny", [0.4, 0.35, 0.25]),
        case("c5", "Clear deny", "deny", [0.0, 1.0, 0.0]),
        case("c6", "Edge", "approve", [0.8, 0.1, 0.1]),
        case("c7", "Timed out", "approve", None, error="timeout"),
    ]
    return {
        "report_version": "decflow/1", "decflow_version": "0.1.0",
        "created_at": "2026-01-02T03:04:05+00:00", "mode": "all", "status": "fail",
        "exit_code": 1,
        "contract": {"name": "loan<b>", "type": "choice", "labels": LABELS,
                     "schema_version": "0.1", "hash": "sha256:" + "ab" * 32,
                     "path": "contracts/loan.yaml"},
        "dataset": {"path": "cases.jsonl", "hash": "sha256:" + "cd" * 32, "n_cases": 7,
                    "n_labeled": 7},
        "backend": {"name": "default", "provider": "mock", "model": "m1", "model_version": None,
                    "details": {"url": "https://example.invalid/decide"}},
        "health": {"status": "ok", "detail": "mock backend"},
        "evaluation": {"confidence_threshold": 0.7, "calibration_bins": 5,
                       "probability_tolerance": 0.001, "max_concurrency": 4},
        "requirements": {}, "warnings": {},
        "metrics": {
            "counts": {"total": 7, "succeeded": 6, "errored": 1, "labeled": 7,
                       "errors_by_kind": {"timeout": 1}, "error_rate": 1 / 7},
            "classification": {"n": 6, "accuracy": 0.5, "macro_f1": 0.47, "ordinal_mae": None,
                               "per_label": {label: {"precision": 0.5, "recall": 0.5,
                                                     "f1": 0.5, "support": 2}
                                             for label in LABELS}},
            "calibration": {"n": 6, "ece": 0.31, "brier": 0.6, "nll": 1.1, "bins": 5,
                            "reliability": bins((0, None, None), (1, 0.4, 0.0),
                                                (0, None, None), (2, 0.71, 0.5),
                                                (3, 0.95, 0.6666666666666666))},
            "selective": {"threshold": 0.7, "n": 7, "coverage": 4 / 7,
                          "abstention_rate": 3 / 7, "selective_accuracy": 0.75,
                          "n_covered_labeled": 4},
            "latency": {"n": 6, "mean_ms": 12.0, "p50_ms": 11.0, "p90_ms": 15.0,
                        "p95_ms": 16.0, "p99_ms": 17.0, "max_ms": 18.0},
        },
        "checks": [
            check("min_accuracy", "requirement", 0.5, 0.9, ">=", "fail",
                  "accuracy 0.5 violates >= 0.9"),
            check("max_ece", "requirement", 0.31, 0.5, "<=", "pass", "ece 0.31 <= 0.5"),
            check("max_latency_p95_ms", "warning", 16.0, 10.0, "<=", "warn",
                  "latency_p95_ms 16 violates <= 10"),
            check("option_order.max_violation_rate", "requirement", 0.5, 0.0, "<=", "fail",
                  "option_order.violation_rate 0.5 violates <= 0 (per case: max_tv_distance "
                  "0.03)"),
        ],
        "failures": [
            {"case_id": "c2", "kind": "mismatch", "input": PLANTED, "expected": "deny",
             "selected": "approve", "confidence": 0.9, "error": None},
            {"case_id": "c7", "kind": "error", "input": "Timed out", "expected": "approve",
             "selected": None, "confidence": None, "error": "timeout: boom"},
        ],
        "results": results,
        "properties": {
            "seed": 42,
            "summaries": [
                summary("option_order", 12, 6, 1),
                summary("label_format", 8, 0, 0),
                {**summary("paraphrase", 6, 1, 2), "rerun_evidence": True},
            ],
            "skipped": [{"property": "whitespace", "case_id": "c5",
                         "reason": f"nothing to change {PLANTED}"}],
            "failures": [
                {"id": "option_order/c1/2", "property": "option_order", "case_id": "c1",
                 "sample": 2, "steps": [{"order": [2, 1, 0]}], "input": PLANTED,
                 "presentation": [["escalate", "escalate"], ["deny", "deny"],
                                  ["approve", "approve"]],
                 "probabilities": {"approve": 0.85, "deny": 0.05, "escalate": 0.1},
                 "error": None,
                 "comparison": {"tv_distance": 0.1, "selected_before": "approve",
                                "selected_after": "approve"},
                 "violations": ["tv_distance 0.1 > 0.03"],
                 "reduced": {"steps": [{"order": [1, 0, 2]}], "input": PLANTED,
                             "presentation": [["deny", "deny"], ["approve", "approve"],
                                              ["escalate", "escalate"]],
                             "probabilities": [0.85, 0.1, 0.05],
                             "violations": ["tv_distance 0.1 > 0.03"], "backend_calls": 2}},
                {"id": "label_format/c3/0", "property": "label_format", "case_id": "c3",
                 "sample": 0, "steps": [], "input": "Borderline | pipe",
                 "presentation": [["APPROVE", "approve"], ["DENY", "deny"],
                                  ["ESCALATE", "escalate"]],
                 "probabilities": None, "error": {"kind": "timeout", "message": "slow"},
                 "comparison": None, "violations": [], "reduced": None},
            ],
            "n_failures": 2,
        },
        "diagnostics": {
            "stability": {"repeats": 2, "n_cases": 20, "n_incomplete": 0, "pairs": 20,
                          "flips": 3, "flip_rate": 0.15, "ci_low": 0.052, "ci_high": 0.36,
                          "epsilon": 0.05, "verdict": "stochastic", "mean_tv": 0.08,
                          "pairs_needed": 40, "cases_with_flip": 3, "advice": "compare"},
            "blindness": {"n": 6, "skew": 0.5, "modal_label": "approve", "distinct": 3,
                          "threshold": 0.9, "blind": False, "duplicates_dropped": 0},
            "counterfactual": {
                "max_flip_rate": 0.1,
                "axes": [
                    {"axis": "gender", "pairs": 10, "exercised": 9, "flips": 3,
                     "attributable": 2, "flip_rate": 3 / 9, "attributable_rate": 2 / 9,
                     "ci_low": 0.063, "ci_high": 0.547, "score": 7 / 9,
                     "verdict": "undecided", "note": "", "direction": None},
                    {"axis": "age", "pairs": 10, "exercised": 10, "flips": 0,
                     "attributable": 0, "flip_rate": 0.0, "attributable_rate": 0.0,
                     "ci_low": 0.0, "ci_high": 0.278, "score": 1.0, "verdict": "undecided",
                     "note": "", "direction": None},
                ],
            },
        },
        "run": {"id": "run-1", "store": "/tmp/store", "regated_at": None,
                "artifacts": {"cases": {"uri": "file:///tmp/store/x", "path": "stages/cases/k",
                                        "sha256": "ef" * 32, "rows": 7}}},
    }


def summary(name: str, evaluated: int, violations: int, flips: int) -> dict[str, Any]:
    return {"property": name, "level": "requirement", "relation": "invariant", "n_cases": 7,
            "n_transformed": evaluated, "n_skipped": 0, "n_errors": 0, "errors_by_kind": {},
            "n_evaluated": evaluated, "n_violations": violations,
            "violation_rate": violations / evaluated, "n_flips": flips,
            "flip_rate": flips / evaluated, "mean_tv_distance": 0.01, "max_tv_distance": 0.1,
            "max_js_divergence": 0.01, "max_abs_delta": 0.1, "max_abs_confidence_delta": 0.1,
            "max_level_decrease": None, "n_reduced": 1}


def vector(name: str, kind: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((VECTORS / name).read_text())
    return {"report_version": "decflow/1", "kind": kind, **report}


# -- a DOM from the stdlib parser --------------------------------------------------------


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.text: list[str] = []

    def iter(self, tag: str | None = None) -> list[Node]:
        found = [self] if tag is None or self.tag == tag else []
        for child in self.children:
            found.extend(child.iter(tag))
        return found

    def all_text(self) -> str:
        return "".join(self.text) + "".join(c.all_text() for c in self.children)

    def num(self, name: str) -> float:
        return float(self.attrs[name] or "nan")


class Tree(HTMLParser):
    """Builds a tree and insists that every non-void element is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.current = self.root
        self.doctype = ""

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag: str) -> None:
        assert self.current.tag == tag, f"</{tag}> closes <{self.current.tag}>"
        assert self.current.parent is not None
        self.current = self.current.parent

    def handle_data(self, data: str) -> None:
        self.current.text.append(data)


def parse(page: str) -> Node:
    tree = Tree()
    tree.feed(page)
    tree.close()
    assert tree.current is tree.root, f"<{tree.current.tag}> is never closed"
    assert tree.doctype.lower() == "doctype html"
    return tree.root


def plot(root: Node, kind: str) -> Node:
    found = [n for n in root.iter("svg") if n.attrs.get("data-plot") == kind]
    assert len(found) == 1, f"{len(found)} plots of kind {kind}"
    return found[0]


def bars(svg: Node) -> list[Node]:
    return [n for n in svg.iter("rect") if n.attrs.get("class") == "bar"]


def render_self_contained(report: dict[str, Any]) -> tuple[str, Node]:
    """The report's HTML page and its parse, checked to load nothing from elsewhere."""
    page = render_html(report)
    root = parse(page)
    lowered = page.lower()
    assert "@import" not in lowered
    assert "url(" not in lowered
    for node in root.iter():
        assert node.tag not in {"script", "link", "img", "iframe", "object", "embed", "base"}
        for name, value in node.attrs.items():
            assert name not in {"src", "href", "xlink:href", "srcset", "action"}, node.tag
            assert name.startswith("on") is False, f"event handler {name}"
            assert "http://" not in (value or "") and "https://" not in (value or "")
    return page, root


# -- HTML --------------------------------------------------------------------------------


def test_html_parses_is_self_contained_and_escapes_user_text() -> None:
    report = run_report()
    page, root = render_self_contained(report)
    assert PLANTED not in page
    text = root.all_text()
    # The planted input is shown as text (golden failure, example as sent and minimal).
    assert text.count(PLANTED) >= 3
    assert "loan<b>" in text  # as text, not as markup
    # The URL in backend details is shown as text, never as a link.
    assert "https://example.invalid/decide" in text


def test_html_shows_banner_identity_gates_and_metrics() -> None:
    from decflow.views.text import short_hash

    report = run_report()
    root = parse(render_html(report))
    text = root.all_text()
    assert "FAIL" in text
    # identity rows are short text: paths, short hashes, counts
    for value in (short_hash(report["contract"]["hash"]), short_hash(report["dataset"]["hash"]),
                  report["contract"]["path"], report["dataset"]["path"], "mock", "m1"):
        assert value in text
    identity = text.split("Identity", 1)[1].split("Gates", 1)[0]
    assert "None" not in identity and "{" not in identity
    rows = [tr for tr in root.iter("tr") if tr.attrs.get("class") in {"pass", "fail", "warn"}]
    # Failing gates first (requirements, then warnings), passing ones last.
    order = {"fail": 0, "warn": 1, "pass": 3}
    listed = sorted(report["checks"], key=lambda c: order[c["status"]])
    assert [c["status"] for c in listed] != [c["status"] for c in report["checks"]]
    assert [tr.attrs["class"] for tr in rows] == [c["status"] for c in listed]
    for row, item in zip(rows, listed, strict=True):
        assert item["message"] in row.all_text()
        assert ("(warning)" in row.all_text()) == (item["level"] == "warning")
    assert "Errors by kind: timeout 1" in text


def test_reliability_bars_are_the_report_bins() -> None:
    report = run_report()
    svg = plot(parse(render_html(report)), "reliability")
    height = svg.num("data-plot-height")
    drawn = bars(svg)
    filled = [b for b in report["metrics"]["calibration"]["reliability"] if b["count"]]
    assert len(drawn) == len(filled)
    for rect, item in zip(drawn, filled, strict=True):
        assert rect.num("data-count") == item["count"]
        assert rect.num("data-accuracy") == item["accuracy"]
        assert rect.num("data-mean-confidence") == item["mean_confidence"]
        assert (rect.num("data-lower"), rect.num("data-upper")) == (item["lower"], item["upper"])
        assert rect.num("height") == pytest.approx(item["accuracy"] * height, abs=0.01)
    ticks = [n for n in svg.iter("line") if n.attrs.get("class") == "mean-confidence"]
    assert len(ticks) == len(filled)


def expected_histogram(report: dict[str, Any]) -> list[int]:
    """DecGuard's rule: a confidence goes to the first bin whose upper edge is >= it."""
    edges = report["metrics"]["calibration"]["reliability"]
    counts = [0] * len(edges)
    for item in report["results"]:
        if item["result"]:
            confidence = item["result"]["confidence"]
            counts[next(i for i, b in enumerate(edges) if confidence <= b["upper"])] += 1
    return counts


def test_confidence_histogram_counts_decided_cases_per_bin() -> None:
    report = run_report()
    svg = plot(parse(render_html(report)), "histogram")
    drawn = bars(svg)
    expected = expected_histogram(report)
    assert [int(b.num("data-count")) for b in drawn] == expected
    assert sum(expected) == report["metrics"]["counts"]["succeeded"]
    scale = svg.num("data-plot-height") / svg.num("data-y-max")
    for rect, count in zip(drawn, expected, strict=True):
        assert rect.num("height") == pytest.approx(count * scale, abs=0.01)
    marker = [n for n in svg.iter("line") if n.attrs.get("class") == "threshold"]
    assert marker[0].num("data-value") == report["metrics"]["selective"]["threshold"]


def hbars(svg: Node) -> dict[tuple[str, str], Node]:
    return {(b.attrs["data-row"] or "", b.attrs["data-series"] or ""): b for b in bars(svg)}


def test_property_chart_reflects_summaries() -> None:
    report = run_report()
    svg = plot(parse(render_html(report)), "properties")
    width, domain = svg.num("data-plot-width"), svg.num("data-domain-max")
    drawn = hbars(svg)
    summaries = report["properties"]["summaries"]
    assert len(drawn) == 2 * len(summaries)
    for s in summaries:
        for series, key in (("violation rate", "violation_rate"), ("flip rate", "flip_rate")):
            rect = drawn[(s["property"], series)]
            assert rect.num("data-value") == s[key]
            assert rect.num("width") == pytest.approx(s[key] / domain * width, abs=0.01)


def test_failing_examples_show_exact_labels_shown_and_minimal_version() -> None:
    report = run_report()
    root = parse(render_html(report))
    examples = [d for d in root.iter("div") if d.attrs.get("class") == "example"]
    failures = report["properties"]["failures"]
    assert len(examples) == len(failures)
    for div, item in zip(examples, failures, strict=True):
        shown_lists = [[span.all_text().split(" = ")[0] for span in labels.children]
                       for labels in div.iter("div") if labels.attrs.get("class") == "labels"]
        assert shown_lists[0] == [shown for shown, _ in item["presentation"]]
        if item["reduced"]:
            assert shown_lists[1] == [shown for shown, _ in item["reduced"]["presentation"]]
            assert "minimal example (2 minimisation calls)" in div.all_text()
        else:
            assert len(shown_lists) == 1
        for problem in item["violations"]:
            assert problem in div.all_text()
    # A shown label that differs from the contract label says which label it stands for.
    assert "APPROVE = approve" in " ".join(e.all_text() for e in examples)
    assert "timeout: slow" in examples[1].all_text()
    text = root.all_text()
    skipped = report["properties"]["skipped"][0]
    assert skipped["reason"] in text and "Skipped cases (1)" in text
    assert "identity: rerun evidence" in text


def test_diagnostics_plots_show_interval_skew_and_axes() -> None:
    report = run_report()
    diagnostics = report["diagnostics"]
    root = parse(render_html(report))
    stability = diagnostics["stability"]
    meter = plot(root, "stability")
    (bar,) = bars(meter)
    assert (bar.num("data-value"), bar.num("data-low"), bar.num("data-high")) == (
        stability["flip_rate"], stability["ci_low"], stability["ci_high"])
    marker = next(n for n in meter.iter("line") if n.attrs.get("class") == "marker")
    assert marker.num("data-value") == stability["epsilon"]
    blind = plot(root, "blindness")
    assert bars(blind)[0].num("data-value") == diagnostics["blindness"]["skew"]
    axes = hbars(plot(root, "axes"))
    # This report is decflow/1-shaped: its axes carry attributable rates, which still show.
    for axis in diagnostics["counterfactual"]["axes"]:
        rect = axes[(axis["axis"], "excess over placebo (one-sided 95% bounds)")]
        assert (rect.num("data-value"), rect.num("data-low"), rect.num("data-high")) == (
            axis["attributable_rate"], axis["ci_low"], axis["ci_high"])
        assert axes[(axis["axis"], "all cross flips")].num("data-value") == axis["flip_rate"]
    assert "stochastic" in root.all_text()


def test_fuzz_mode_has_no_golden_metrics_and_test_mode_no_properties() -> None:
    fuzz = {**run_report(), "mode": "fuzz", "diagnostics": None}
    root = parse(render_html(fuzz))
    assert not [n for n in root.iter("svg") if n.attrs.get("data-plot") == "reliability"]
    plot(root, "properties")
    test = {**run_report(), "mode": "test", "properties": None, "diagnostics": None}
    root = parse(render_html(test))
    plot(root, "reliability")
    assert not [n for n in root.iter("svg") if n.attrs.get("data-plot") == "properties"]


def test_diff_report_shows_shift_metrics_and_segments() -> None:
    report = vector("diff-refund-default-vs-order_sensitive.json", "diff")
    page, root = render_self_contained(report)
    text = root.all_text()
    for name in list(report["shift"]) + list(report["counts"]):
        assert f"<td>{words(name)}</td>" in page  # keys read as words
        assert name == words(name) or f">{name}<" not in page
    drawn = hbars(plot(root, "diff-metrics"))
    for name in ("accuracy", "ece", "coverage"):
        assert drawn[(name, "baseline")].num("data-value") == report["metrics"][name]["baseline"]
        assert drawn[(name, "candidate")].num("data-value") == report["metrics"][name][
            "candidate"]
    segments = hbars(plot(root, "segments"))
    for s in report["segments"]:
        row = f"{s['key']}={s['value']}"
        assert segments[(row, "baseline accuracy")].num("data-value") == s["baseline_accuracy"]
    failing = [c for c in report["checks"] if c["status"] != "pass"]
    assert all(c["message"] in text for c in failing)


def test_check_report_shows_drift_histogram_and_segments() -> None:
    report = vector("check-refund-drift.json", "check")
    _, root = render_self_contained(report)
    text = root.all_text()
    assert all(words(name) in text for name in report["drift"])
    assert "No baseline" not in text
    histogram = bars(plot(root, "histogram"))
    assert [int(b.num("data-count")) for b in histogram] == report["metrics"]["confidence"][
        "histogram"]
    segments = hbars(plot(root, "segments"))
    for s in report["segments"]:
        rect = segments[(f"{s['key']}={s['value']}", "accuracy")]
        assert rect.num("data-value") == s["metrics"]["outcomes"]["accuracy"]
    limits = [n for n in plot(root, "segments").iter("line")
              if n.attrs.get("class") == "row-marker"]
    assert [m.num("data-value") for m in limits] == [
        s["checks"][0]["threshold"] for s in report["segments"]]
    undrifted = parse(render_html(vector("check-refund.json", "check"))).all_text()
    assert "No baseline: drift was not measured." in undrifted


# -- Markdown ----------------------------------------------------------------------------


def test_markdown_summary_of_a_run() -> None:
    report = run_report()
    text = render_markdown(report)
    assert "<script>" not in text and "<b>" not in text
    first, _, rest = text.partition("\n")
    # The headline leads: the failing gates, failing requirements first.
    assert first.startswith("**FAIL 2/4 (1 WARN): min\\_accuracy 0.5 &lt; 0.9; option\\_order.")
    assert "\n# decflow all: loan&lt;b&gt; (choice)" in rest
    assert "**FAIL**" in text
    assert "sha256:abababababab" in text
    failing = [c for c in report["checks"] if c["status"] != "pass"]
    assert f"Checks: {len(report['checks']) - len(failing)} of {len(report['checks'])} hold" \
        in text
    assert "max\\_latency\\_p95\\_ms (warning)" in text
    for s in report["properties"]["summaries"]:
        assert f"| {s['property'].replace('_', chr(92) + '_')}" in text
    assert "Borderline \\| pipe" in text
    assert "  - sent: [escalate, deny, approve]" in text
    assert "  - minimal: [deny, approve, escalate]" in text
    assert "Stability: **stochastic**: 3 of 20 rerun pairs flipped" in text
    assert "| gender | 9 | 3 | 0.2222 | [0.063, 0.547] | n/a | undecided |" in text
    # Every table row has as many cells as its header: user pipes are escaped.
    for block in text.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            widths = {len(line.replace("\\|", "").split("|")) for line in rows}
            assert len(widths) == 1, block


def test_markdown_of_diff_and_check_reports() -> None:
    diff = vector("diff-refund-default-vs-order_sensitive.json", "diff")
    text = render_markdown(diff)
    assert "## Shift" in text and "## Segments" in text and "| locale=en | 11 |" in text
    assert "mean\\_tv\\_distance 0.05082 violates &lt;= 0.03" in text
    drift = vector("check-refund-drift.json", "check")
    text = render_markdown(drift)
    assert "## Drift against the baseline" in text
    for s in drift["segments"]:
        assert f"| {s['key']}={s['value']} | {s['status']} |" in text
    assert "## Drift" not in render_markdown(vector("check-refund.json", "check"))


# -- JUnit -------------------------------------------------------------------------------

SUITE_ATTRS = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp",
               "hostname", "id", "package"}


def validate_junit(document: str) -> ET.Element:
    """The common JUnit schema's shape: testsuites > testsuite > (properties?, testcase*),
    testcase > (failure | error | skipped)?, with integer counts that add up."""
    assert document.startswith("<?xml")
    root = ET.fromstring(document)
    assert root.tag == "testsuites"
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for suite in suites:
        assert set(suite.attrib) <= SUITE_ATTRS
        assert {"name", "tests", "failures", "errors"} <= set(suite.attrib)
        children = [c.tag for c in suite]
        assert children.count("properties") <= 1 and (
            "properties" not in children or children[0] == "properties")
        cases = suite.findall("testcase")
        assert len(children) - children.count("properties") == len(cases)
        for prop in suite.findall("properties/property"):
            assert set(prop.attrib) == {"name", "value"}
        failures = 0
        for testcase in cases:
            assert {"name", "classname"} <= set(testcase.attrib)
            outcome = list(testcase)
            assert len(outcome) <= 1 and all(o.tag in {"failure", "error", "skipped"}
                                             for o in outcome)
            failures += sum(1 for o in outcome if o.tag == "failure")
            for o in outcome:
                assert "message" in o.attrib and "type" in o.attrib
        assert int(suite.attrib["tests"]) == len(cases)
        assert int(suite.attrib["failures"]) == failures
        assert int(suite.attrib["errors"]) == 0
    assert int(root.attrib["tests"]) == sum(int(s.attrib["tests"]) for s in suites)
    return root


@pytest.mark.parametrize("report", [
    run_report(),
    vector("diff-refund-default-vs-order_sensitive.json", "diff"),
    vector("check-refund-drift.json", "check"),
    vector("check-refund.json", "check"),
], ids=["run", "diff", "check-drift", "check"])
def test_junit_one_testcase_per_check(report: dict[str, Any]) -> None:
    root = validate_junit(render_junit(report))
    cases = root.findall("testsuite/testcase")
    checks = report["checks"]
    assert len(cases) == len(checks)
    failing = sum(1 for c in checks if c["status"] != "pass")
    assert root.findall("testsuite")[0].attrib["failures"] == str(failing)
    for testcase, item in zip(cases, checks, strict=True):
        warning = item["level"] == "warning"
        assert testcase.attrib["name"] == item["gate"] + (" (warning)" if warning else "")
        assert testcase.attrib["classname"].endswith(".warnings" if warning else ".requirements")
        failure = testcase.find("failure")
        assert (failure is None) == (item["status"] == "pass")
        if failure is not None:
            assert failure.attrib["message"] == item["message"]
            assert failure.attrib["type"] == ("warning" if warning else "requirement")
    properties = {p.attrib["name"]: p.attrib["value"]
                  for p in root.findall("testsuite/properties/property")}
    assert properties["status"] == report["status"]
    assert properties["exit_code"] == str(report["exit_code"])


def test_junit_survives_control_characters_and_no_checks() -> None:
    report = run_report()
    report["checks"][0]["message"] = "segment[locale=\x01<&>] bad"
    root = validate_junit(render_junit(report))
    failure = root.findall("testsuite/testcase/failure")[0]
    assert failure.attrib["message"] == "segment[locale=\\x01<&>] bad"
    empty = validate_junit(render_junit({**run_report(), "checks": []}))
    assert empty.attrib["tests"] == "0"


def test_views_of_a_report_without_golden_metrics_or_contract(tmp_path: Path) -> None:
    from decflow.views.outputs import write_views

    report = {"report_version": "decflow/1", "mode": "stability", "status": "pass",
              "exit_code": 0, "checks": [], "metrics": None, "properties": None,
              "diagnostics": {"stability": run_report()["diagnostics"]["stability"]}}
    paths = {name: tmp_path / f"out.{name}" for name in ("html", "markdown", "junit")}
    write_views(report, **{name: str(path) for name, path in paths.items()})
    root = parse(paths["html"].read_text())
    plot(root, "stability")
    assert "No gate is configured" in root.all_text()
    assert "No gate is configured" in paths["markdown"].read_text()
    assert validate_junit(paths["junit"].read_text()).attrib["tests"] == "0"


# -- real runs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from decflow.pipeline.contract_run.runner import run_contract
    from decflow.pipeline.spec import RunSpec
    from decflow.store.store import Store

    url = str(tmp_path_factory.mktemp("store"))
    store = Store(url)
    contract = str(EXAMPLES / "refund" / "decguard.yaml")
    reports = {}
    for mode, backend in (("test", "default"), ("all", "order_sensitive")):
        spec = RunSpec(contract_path=contract, store_url=url, run_id=f"views-{mode}",
                       mode=mode, backend=backend)
        reports[mode] = run_contract(spec, store)
    return reports


@pytest.mark.parametrize("mode", ["test", "all"])
def test_views_of_real_runs(real_reports: dict[str, dict[str, Any]], mode: str) -> None:
    report = real_reports[mode]
    _, root = render_self_contained(report)
    reliability = bars(plot(root, "reliability"))
    filled = [b for b in report["metrics"]["calibration"]["reliability"] if b["count"]]
    assert [(r.num("data-count"), r.num("data-accuracy")) for r in reliability] == [
        (b["count"], b["accuracy"]) for b in filled]
    assert [int(b.num("data-count")) for b in bars(plot(root, "histogram"))] == \
        expected_histogram(report)
    if report["properties"]:
        drawn = hbars(plot(root, "properties"))
        for s in report["properties"]["summaries"]:
            assert drawn[(s["property"], "violation rate")].num("data-value") == \
                s["violation_rate"]
        examples = [d for d in root.iter("div") if d.attrs.get("class") == "example"]
        assert examples and len(examples) <= len(report["properties"]["failures"])
    validate_junit(render_junit(report))
    assert report["contract"]["name"].replace("_", "\\_") in render_markdown(report)


# -- PNG rendering -----------------------------------------------------------------------


def test_render_script_writes_a_png(tmp_path: Path) -> None:
    # scripts/install.sh --test installs Debian's chromium
    assert any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))
    source = tmp_path / "report.json"
    source.write_text(json.dumps(copy.deepcopy(run_report())))
    out = tmp_path / "report.png"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(source), str(out), "--width", "800", "--height", "600"],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (800, 600)


def test_the_failing_refund_all_report_fits_a_window_and_groups_its_failures(
    tmp_path: Path,
) -> None:
    """The HTML of the failing refund `--all` run (27 near-identical option_order failures)
    fits a 1,440 px wide window without sideways scrolling and is at most 4,000 px tall:
    one card per failing property with its count and first cases, the rest behind a
    disclosure. Without --height the PNG is as tall as the page (it used to stop at 2000 px).
    """
    from decflow.views.text import FIRST_CASES

    out_json = tmp_path / "long.json"
    run_cli("test", "--all", str(ROOT / "contracts" / "refund" / "decflow.yaml"), "-b",
            "order_sensitive", "--store", str(tmp_path / "store"), "-o", str(out_json))
    report = json.loads(out_json.read_text())
    failing = [f for f in report["properties"]["failures"] if f["property"] == "option_order"]
    assert len(failing) == 27
    measured = subprocess.run([sys.executable, str(SCRIPT), str(out_json), "--measure",
                               "--width", "1440"],
                              capture_output=True, text=True, timeout=180, check=False)
    assert measured.returncode == 0, measured.stderr
    width, height = (int(n) for n in measured.stdout.strip().split("x"))
    assert width == 1440 and 2000 < height <= 4000, (width, height)
    out = tmp_path / "long.png"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out_json), str(out), "--width",
                           "1440"], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    assert struct.unpack(">II", out.read_bytes()[16:24]) == (1440, height)

    root = parse(render_html(report))
    groups = [d for d in root.iter("div") if d.attrs.get("class") == "group"]
    (group,) = groups  # one failing property
    assert "option_order: 27 failing cases" in group.all_text()
    examples = [d for d in group.iter("div") if d.attrs.get("class") == "example"]
    assert [d.iter("b")[0].all_text() for d in examples] == [
        f["id"] for f in failing[:FIRST_CASES]]
    (details,) = list(group.iter("details"))
    assert "24 more failing cases" in details.all_text()
    rows = details.iter("tr")[1:]  # under the header
    assert [tr.iter("td")[0].all_text() for tr in rows] == [f["id"] for f in failing[3:]]
    markdown = render_markdown(report)
    assert "**option\\_order**: 27 failing cases, the first 3" in markdown
    assert "- … 24 more in the report JSON (`properties.failures`)" in markdown


def test_numbers_that_round_to_zero_show_no_sign_and_counts_agree() -> None:
    from decflow.gates.headline import number
    from decflow.views.text import counted, percent

    # the one formatter of every view: 4 significant digits, never -0
    assert [number(-0.0), number(-0.00004), number(6 / 11), number(1.0), number(None)] == \
        ["0", "-4e-05", "0.5455", "1", "n/a"]
    assert [percent(0.125), percent(-0.0), percent(None)] == ["12.5%", "0.0%", "n/a"]
    assert [counted(1, "call"), counted(2, "call"), counted(0, "call")] == \
        ["1 call", "2 calls", "0 calls"]
