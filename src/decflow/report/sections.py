"""What a report's sections decide, as pure functions over report dicts: the report's kind,
which transformed cases failed, how options were shown, histogram counts and the persona
axis rates. Shared by the pipeline (replay reads the failures) and every view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decflow.report.model import Report
from decflow.report.modes import mode_named
from decflow.report.run_report import GoldenMetrics, Properties, RunView


def report_headline(report: dict[str, Any]) -> str:
    """The first line of a report dict (`Report.first_line`)."""
    return Report.view(report).first_line()


def status_label(status: str) -> str:
    """How a check's status is shown: PASS, FAIL, WARN; *not established* shows as WARN
    (its message says not established)."""
    return "WARN" if status == "not_established" else status.upper()


def report_kind(report: dict[str, Any]) -> str:
    """run, diff or check; DecGuard 0.1 diff/check reports carry only their version key."""
    if "kind" in report:
        return str(report["kind"])
    if "diff_version" in report:
        return "diff"
    if "check_version" in report:
        return "check"
    return "run"


def property_failures(properties: dict[str, Any]) -> list[dict[str, Any]]:
    """Failing transformed cases: the report's `failures`, or the failing stored `pairs`
    (DecGuard's shape: a violation, or an error other than the original's)."""
    return failing_cases(properties.get("failures"), properties.get("pairs"))


def failing_cases(failures: list[dict[str, Any]] | None,
                  pairs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`failures` when the report lists them, else the failing ones of `pairs`."""
    if failures is not None:
        return list(failures)
    failing = []
    for pair in pairs or []:
        error = pair.get("error") or {}
        if pair.get("violations") or (error and error.get("kind") != "original_error"):
            failing.append(pair)
    return failing


def failures_by_property(properties: Properties) -> list[tuple[str, list[dict[str, Any]]]]:
    """The failing transformed cases grouped by property, properties in first-seen order:
    views show one group per property (its count, the first few cases) instead of dozens of
    near-identical cases."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in failing_cases(properties.failures, properties.pairs):
        groups.setdefault(str(item.get("property")), []).append(item)
    return list(groups.items())


def shown_pairs(item: dict[str, Any], labels: Sequence[str]) -> list[tuple[str, str]]:
    """(label as shown, contract label) in the order the backend saw them."""
    if item.get("presentation"):
        return [(str(shown), str(label)) for shown, label in item["presentation"]]
    if item.get("shown_labels"):
        order = item.get("label_order") or range(len(item["shown_labels"]))
        return [(str(shown), labels[i] if i < len(labels) else "?")
                for shown, i in zip(item["shown_labels"], order, strict=False)]
    return [(label, label) for label in labels]


def bin_edges(reliability: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """(lower, upper) of each reliability bin."""
    return [(b["lower"], b["upper"]) for b in reliability]


def confidence_histogram(reliability: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]],
                         ) -> list[int] | None:
    """Cases per calibration bin, counted from the decided per-case results with the
    reliability bins' edges (a confidence goes to the first bin whose upper edge is at or
    above it, NaN to the first bin); a check report has its own histogram. Counted by
    numpy: a run has tens of thousands of cases."""
    import numpy as np

    edges = bin_edges(reliability)
    if not edges or not results:
        return None
    confidence = np.array([item["result"]["confidence"] for item in results
                           if item.get("result")], dtype=np.float64)
    index = np.searchsorted(np.array([upper for _, upper in edges], dtype=np.float64),
                            confidence, side="left")
    index[np.isnan(confidence)] = 0  # as a comparison with NaN: below every edge
    counts = np.bincount(np.minimum(index, len(edges) - 1), minlength=len(edges))
    return [int(count) for count in counts]


def axis_rate(axis: dict[str, Any]) -> float | None:
    """The persona-axis figure its bounds are about: the case-level excess (decflow/2), the
    attributable flip rate (decflow/1 reports), or a plain rate."""
    rate: float | None = axis["excess"] if "excess" in axis else axis.get(
        "attributable_rate", axis.get("rate"))
    return rate


def axis_verdict(axis: dict[str, Any]) -> str:
    """The verdict, labelled *unattributed* when no placebo stood behind it."""
    verdict = str(axis.get("verdict", "n/a"))
    return verdict + (" (unattributed)" if axis.get("attribution") == "unattributed" else "")


def axis_base(axis: dict[str, Any]) -> int | None:
    return axis.get("exercised", axis.get("pairs"))


def shown_golden(report: RunView) -> GoldenMetrics | None:
    """The golden metrics, when the run's mode fills them and the report carries them."""
    return report.metrics if mode_named(report.mode).fills("golden") else None


def labels_of(report: Report) -> list[str]:
    """The decision's labels (none without a contract section)."""
    return list(report.contract.labels) if report.contract else []
