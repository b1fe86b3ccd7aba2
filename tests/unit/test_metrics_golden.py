"""Golden metrics against DecGuard 0.1.1: its documented hand-checked vectors and the
metrics it stored for the four example runs (recomputed here from the per-case results)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import yaml

from decflow.metrics.golden_metrics import calibration_bin_index, golden_metrics, metric_value
from decflow.metrics.numeric import exact_mean, percentiles, row_sums
from tests.support.paths import REFERENCE

VECTORS = REFERENCE / "decguard-vectors"
EXAMPLES = REFERENCE / "decguard-examples"

GOLDEN_RUNS = {
    "golden-refund-test-default.json": "refund",
    "golden-refund-test-order_sensitive.json": "refund",
    "golden-severity-all.json": "severity",
    "golden-spam-all.json": "spam",
}


@dataclass
class GoldenRun:
    """A stored DecGuard golden run with the contract settings it was evaluated under."""

    report: dict[str, Any]
    contract: dict[str, Any]
    labels: list[str]
    decision_type: str
    probabilities: np.ndarray
    expected_index: np.ndarray

    def metrics(self) -> dict[str, Any]:
        evaluation = self.contract.get("evaluation") or {}
        n = len(self.expected_index)
        return golden_metrics(
            labels=self.labels,
            decision_type=self.decision_type,
            probabilities=self.probabilities,
            errored=np.zeros(n, dtype=bool),
            expected_index=self.expected_index,
            latency_ms=np.zeros(n),
            error_kinds=[None] * n,
            calibration_bins=evaluation.get("calibration_bins", 10),
            confidence_threshold=evaluation.get("confidence_threshold"),
        )


def load_golden_run(name: str) -> GoldenRun:
    report = json.loads((VECTORS / name).read_text())
    contract = yaml.safe_load((EXAMPLES / GOLDEN_RUNS[name] / "decguard.yaml").read_text())
    decision = contract["decision"]
    raw_labels = decision.get("options") or decision.get("labels") or decision.get("levels")
    labels = [str(label) for label in raw_labels]
    results = report["results"]
    probabilities = np.array([[r["probabilities"][label] for label in labels] for r in results])
    expected = np.array(
        [labels.index(r["expected"]) if r.get("expected") is not None else -1 for r in results],
        dtype=np.int64,
    )
    return GoldenRun(report, contract, labels, decision["type"], probabilities, expected)


def assert_same(actual: Any, reference: Any, path: str = "metrics") -> None:
    """Same structure, equal ints/strings/None, floats within 1e-9 relative."""
    if isinstance(reference, dict):
        assert isinstance(actual, dict), path
        assert list(actual) == list(reference), path
        for key in reference:
            assert_same(actual[key], reference[key], f"{path}.{key}")
    elif isinstance(reference, list):
        assert isinstance(actual, list) and len(actual) == len(reference), path
        for i, (a, r) in enumerate(zip(actual, reference, strict=True)):
            assert_same(a, r, f"{path}[{i}]")
    elif isinstance(reference, float):
        assert isinstance(actual, float), path
        assert actual == pytest.approx(reference, rel=1e-9, abs=0.0), path
    else:
        assert type(actual) is type(reference) and actual == reference, path


def metrics_for(
    labels: list[str],
    probabilities: list[list[float]],
    expected: list[str | None],
    *,
    decision_type: str = "choice",
    errored: list[bool] | None = None,
    latency: list[float] | None = None,
    kinds: list[str | None] | None = None,
    bins: int = 10,
    threshold: float | None = None,
) -> dict[str, Any]:
    n = len(expected)
    return golden_metrics(
        labels=labels,
        decision_type=decision_type,
        probabilities=np.array(probabilities, dtype=np.float64).reshape(n, len(labels)),
        errored=np.array(errored or [False] * n, dtype=bool),
        expected_index=np.array([-1 if e is None else labels.index(e) for e in expected]),
        latency_ms=np.array(latency or [0.0] * n, dtype=np.float64),
        error_kinds=kinds or [None] * n,
        calibration_bins=bins,
        confidence_threshold=threshold,
    )


def one_hot(labels: list[str], chosen: list[str]) -> list[list[float]]:
    return [[1.0 if label == c else 0.0 for label in labels] for c in chosen]


# --- hand-checked vectors of DecGuard's own tests (behaviour digest, section d) ---


def test_accuracy_and_macro_f1_ignore_labels_absent_from_both_sides() -> None:
    labels = ["a", "b", "c", "d"]
    m = metrics_for(labels, one_hot(labels, ["a", "b", "b", "a"]), ["a", "a", "b", "c"])
    classification = m["classification"]
    assert classification["accuracy"] == 0.5
    assert classification["macro_f1"] == pytest.approx((0.5 + 2 / 3 + 0) / 3, rel=1e-12)
    assert classification["per_label"]["d"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 0,
    }
    assert classification["per_label"]["c"]["support"] == 1
    assert classification["ordinal_mae"] is None


def test_nll_of_expected_label() -> None:
    m = metrics_for(["a", "b"], [[0.7, 0.3], [0.4, 0.6]], ["a", "a"])
    expected = -(math.log(0.7) + math.log(0.4)) / 2
    assert m["calibration"]["nll"] == pytest.approx(expected, rel=1e-12)


def test_nll_floors_a_total_miss() -> None:
    m = metrics_for(["a", "b"], [[1.0, 0.0]], ["b"])
    assert m["calibration"]["nll"] == pytest.approx(-math.log(1e-15), rel=1e-12)


def test_brier_sums_over_all_labels() -> None:
    m = metrics_for(["a", "b", "c"], [[0.7, 0.2, 0.1], [0.4, 0.5, 0.1]], ["a", "a"])
    assert m["calibration"]["brier"] == pytest.approx((0.14 + 0.62) / 2, rel=1e-12)


def test_ece_and_reliability_bins() -> None:
    labels = ["a", "b", "c", "d"]
    probabilities = [
        [0.95, 0.05, 0.0, 0.0],
        [0.85, 0.15, 0.0, 0.0],
        [0.3, 0.25, 0.25, 0.2],
        [0.3, 0.25, 0.25, 0.2],
    ]
    m = metrics_for(labels, probabilities, ["a", "b", "a", "b"])
    calibration = m["calibration"]
    assert calibration["ece"] == pytest.approx(0.325, rel=1e-12)
    assert [b["count"] for b in calibration["reliability"]] == [0, 0, 2, 0, 0, 0, 0, 0, 1, 1]
    assert calibration["reliability"][2]["accuracy"] == 0.5
    assert calibration["reliability"][0]["mean_confidence"] is None
    assert calibration["reliability"][0]["accuracy"] is None


def test_bin_index_uses_first_upper_edge_at_or_above_the_confidence() -> None:
    confidences = [0.0, 0.1, 0.1000001, 0.3, 0.7, 0.95, 1.0]
    assert calibration_bin_index(confidences, 10).tolist() == [0, 0, 1, 2, 6, 9, 9]


@pytest.mark.parametrize("n_bins", [1, 3, 7, 10, 15, 33, 100])
def test_bin_index_at_and_beside_every_edge(n_bins: int) -> None:
    edges = np.arange(0, n_bins + 2) / n_bins
    values = np.concatenate([edges, np.nextafter(edges, 2.0), np.nextafter(edges, -1.0),
                             np.random.default_rng(n_bins).random(5000), [5e-324, 3.0]])
    first_edge_at_or_above = np.searchsorted(np.arange(1, n_bins + 1) / n_bins, values)
    expected = np.minimum(first_edge_at_or_above, n_bins - 1)
    assert calibration_bin_index(values, n_bins).tolist() == expected.tolist()


def test_bin_edges_are_fractions_of_the_bin_count() -> None:
    m = metrics_for(["a", "b"], [[0.9, 0.1]], ["a"], bins=10)
    bins = m["calibration"]["reliability"]
    assert [b["lower"] for b in bins] == [i / 10 for i in range(10)]
    assert [b["upper"] for b in bins] == [(i + 1) / 10 for i in range(10)]
    assert bins[2]["lower"] == 0.2 and bins[3]["lower"] == 0.3


def test_percentiles_interpolate_linearly_between_closest_ranks() -> None:
    assert percentiles([4.0, 1.0, 3.0, 2.0], [50]) == [2.5]
    assert percentiles([1.0, 2.0, 3.0, 4.0], [95]) == [pytest.approx(3.85, rel=1e-12)]
    assert percentiles([], [50, 95]) == [None, None]


def test_percentiles_agree_with_numpy_default_method() -> None:
    values = np.random.default_rng(3).exponential(size=257)
    qs = [0, 1, 50, 90, 95, 99, 100]
    assert percentiles(values, qs) == pytest.approx(np.percentile(values, qs), rel=1e-12)


def test_ordinal_mae_in_scale_steps() -> None:
    levels = ["1", "2", "3", "4"]
    m = metrics_for(levels, one_hot(levels, ["2", "2"]), ["1", "4"], decision_type="score")
    assert m["classification"]["ordinal_mae"] == 1.5


# --- the stored DecGuard runs ---


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS))
def test_metrics_reproduce_stored_golden_runs(name: str) -> None:
    run = load_golden_run(name)
    actual = run.metrics()
    reference = run.report["metrics"]
    for section in ("counts", "classification", "calibration", "selective"):
        assert_same(actual[section], reference[section], section)
    assert list(actual["latency"]) == list(reference["latency"])
    assert actual["latency"]["n"] == reference["latency"]["n"]


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS))
def test_selected_labels_match_stored_results(name: str) -> None:
    run = load_golden_run(name)
    selected = [run.labels[i] for i in np.argmax(run.probabilities, axis=1)]
    assert selected == [r["selected"] for r in run.report["results"]]


# --- populations, errors, empty cases ---


def test_errored_rows_are_ignored_and_counted_by_kind() -> None:
    labels = ["a", "b"]
    nan = float("nan")
    m = metrics_for(
        labels,
        [[0.9, 0.1], [nan, nan], [0.2, 0.8], [nan, nan], [nan, nan], [0.6, 0.4]],
        ["a", "a", "a", None, "b", None],
        errored=[False, True, False, True, True, False],
        latency=[10.0, 999.0, 30.0, 999.0, 999.0, 20.0],
        kinds=[None, "timeout", None, "backend_error", "timeout", None],
        threshold=0.7,
    )
    assert m["counts"] == {
        "total": 6,
        "succeeded": 3,
        "errored": 3,
        "labeled": 2,
        "errors_by_kind": {"backend_error": 1, "timeout": 2},
        "error_rate": 0.5,
    }
    assert list(m["counts"]["errors_by_kind"]) == ["backend_error", "timeout"]
    assert m["classification"]["accuracy"] == 0.5
    assert m["calibration"]["n"] == 2
    # Coverage counts unlabeled decided cases; selective accuracy only labeled ones.
    assert m["selective"]["n"] == 3
    assert m["selective"]["coverage"] == pytest.approx(2 / 3, rel=1e-12)
    assert m["selective"]["abstention_rate"] == pytest.approx(1 / 3, rel=1e-12)
    assert m["selective"]["selective_accuracy"] == 0.5
    assert m["selective"]["n_covered_labeled"] == 2
    latency = m["latency"]
    assert latency["n"] == 3
    assert latency["mean_ms"] == 20.0
    assert latency["p50_ms"] == 20.0
    assert latency["max_ms"] == 30.0
    assert latency["p95_ms"] == pytest.approx(np.percentile([10.0, 20.0, 30.0], 95), rel=1e-12)


def test_nothing_labeled_gives_null_quality_metrics() -> None:
    m = metrics_for(["a", "b"], [[0.9, 0.1], [0.3, 0.7]], [None, None], threshold=0.8)
    assert m["classification"] == {
        "n": 0,
        "accuracy": None,
        "macro_f1": None,
        "per_label": {},
        "ordinal_mae": None,
    }
    calibration = m["calibration"]
    assert (calibration["ece"], calibration["brier"], calibration["nll"]) == (None, None, None)
    assert [b["count"] for b in calibration["reliability"]] == [0] * 10
    assert m["selective"]["coverage"] == 0.5
    assert m["selective"]["selective_accuracy"] is None


def test_every_case_errored() -> None:
    m = metrics_for(
        ["a", "b"], [[0.0, 0.0]], ["a"], errored=[True], kinds=["timeout"], threshold=0.5
    )
    assert m["counts"]["error_rate"] == 1.0
    assert m["selective"]["coverage"] is None
    assert m["selective"]["abstention_rate"] is None
    assert m["latency"] == {
        "n": 0,
        "mean_ms": None,
        "p50_ms": None,
        "p90_ms": None,
        "p95_ms": None,
        "p99_ms": None,
        "max_ms": None,
    }


def test_no_cases_at_all() -> None:
    m = metrics_for(["a", "b"], [], [])
    assert m["counts"]["error_rate"] == 0.0
    assert m["counts"]["total"] == 0
    assert m["selective"] is None
    assert metric_value(m, "coverage") is None


def test_ties_select_the_first_label() -> None:
    m = metrics_for(["a", "b", "c"], [[0.4, 0.4, 0.2]], ["a"], threshold=0.4)
    assert m["classification"]["accuracy"] == 1.0
    assert m["selective"]["coverage"] == 1.0


def test_metric_value_maps_gate_metric_names() -> None:
    m = metrics_for(["a", "b"], [[0.9, 0.1]], ["a"], latency=[7.0], threshold=0.5)
    assert metric_value(m, "accuracy") == 1.0
    assert metric_value(m, "coverage") == 1.0
    assert metric_value(m, "abstention_rate") == 0.0
    assert metric_value(m, "latency_p95_ms") == 7.0
    assert metric_value(m, "error_rate") == 0.0
    assert metric_value(m, "ordinal_mae") is None


# --- exact summation helpers ---


def test_row_sums_equal_fsum_per_row() -> None:
    rng = np.random.default_rng(11)
    rows, cols = 3000, 12
    matrix = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-25, 25, (rows, cols))
    matrix[:500, -1] = -matrix[:500, 0]
    matrix[500:1500] = rng.choice(
        [1.0, -1.0, 2.0**-53, -(2.0**-53), 2.0**-54, 2.0**-106, 3 * 2.0**-106, 1e-30, 0.0],
        (1000, cols),
    )
    expected = [math.fsum(row) for row in matrix.tolist()]
    assert row_sums(matrix).tolist() == expected
    assert row_sums(matrix[:, :3]).tolist() == [math.fsum(r) for r in matrix[:, :3].tolist()]


def test_exact_mean_is_fsum_over_count() -> None:
    values = [0.1] * 10 + [1e16, -1e16]
    assert exact_mean(values) == math.fsum(values) / 12
    assert exact_mean([]) is None
