"""Golden-test metrics: the ``metrics`` section of a test report, DecGuard 0.1 semantics.

Inputs are whole columns (one row per golden case, dataset order); everything is computed
with numpy over those columns, and every sum is a correctly rounded ``fsum`` so stored
results reproduce the reference numbers exactly.

Populations: *decided* cases have probabilities (not errored); *labeled* cases are decided
cases with an expected label. Accuracy, F1 and calibration use labeled cases; coverage and
latency use decided cases; the error rate uses all cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from decflow.contracts.gates import GOLDEN_GATES
from decflow.metrics.numeric import exact_mean, exact_sum, percentiles, row_sums

NLL_FLOOR = 1e-15
"""Probabilities are floored here inside the log: one confident miss adds about 34.5."""

LATENCY_PERCENTILES = (50, 90, 95, 99)

Metrics = dict[str, Any]


def selected_and_confidence(
    probabilities: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Selected label index per row (argmax, ties to the first label) and its probability."""
    selected = np.argmax(probabilities, axis=1).astype(np.int64)
    confidence = probabilities[np.arange(len(selected)), selected]
    return selected, confidence


def calibration_bin_index(confidence: npt.ArrayLike, n_bins: int) -> npt.NDArray[np.int64]:
    """Bin i covers (i/n, (i+1)/n]; bin 0 also holds 0: the first bin whose upper edge is
    >= the confidence (values above 1 land in the last bin)."""
    upper_edges = np.arange(1, n_bins + 1) / n_bins
    values = np.asarray(confidence, dtype=np.float64)
    # ceil(x * n) - 1 is the bin up to a rounding step of x * n (a binary search over the
    # edges costs 3x more); one step up or down then settles it against the edges
    index = np.clip(np.ceil(values * n_bins), 1, n_bins).astype(np.int64) - 1
    index += (index < n_bins - 1) & (values > upper_edges[index])
    lower = np.maximum(index - 1, 0)
    index -= (index > 0) & (values <= upper_edges[lower])
    return index


def reliability(
    confidence: npt.NDArray[np.float64], correct: npt.NDArray[np.bool_], n_bins: int
) -> tuple[list[dict[str, Any]], float | None]:
    """Reliability bins and the expected calibration error over them.

    ECE = sum over non-empty bins of (count / total) * |bin accuracy - bin mean confidence|;
    None when there are no cases.
    """
    bin_index = calibration_bin_index(confidence, n_bins)
    order = np.argsort(bin_index, kind="stable")
    counts = np.bincount(bin_index, minlength=n_bins)
    correct_counts = np.bincount(bin_index, minlength=n_bins, weights=correct.astype(np.float64))
    starts = np.concatenate(([0], np.cumsum(counts)))
    sorted_confidence = confidence[order]
    means = [exact_mean(sorted_confidence[starts[i] : starts[i + 1]]) for i in range(n_bins)]
    return reliability_from_bins(counts.tolist(), means, correct_counts.astype(np.int64).tolist())


def reliability_from_bins(
    counts: Sequence[int], mean_confidences: Sequence[float | None], correct: Sequence[int]
) -> tuple[list[dict[str, Any]], float | None]:
    """`reliability` from per-bin case counts, mean confidences and correct counts."""
    n_bins = len(counts)
    total = sum(counts)
    bins: list[dict[str, Any]] = []
    gaps: list[float] = []
    for i, (count, mean_confidence, hits) in enumerate(
        zip(counts, mean_confidences, correct, strict=True)
    ):
        accuracy = hits / count if count else None
        if mean_confidence is not None and accuracy is not None:
            gaps.append(count / total * abs(accuracy - mean_confidence))
        bins.append(
            {
                "lower": i / n_bins,
                "upper": (i + 1) / n_bins,
                "count": count,
                "mean_confidence": mean_confidence,
                "accuracy": accuracy,
            }
        )
    return bins, (exact_sum(gaps) if total else None)


def _classification(
    labels: Sequence[str],
    decision_type: str,
    expected: npt.NDArray[np.int64],
    predicted: npt.NDArray[np.int64],
) -> Metrics:
    n_labels = len(labels)
    n = len(expected)
    support = np.bincount(expected, minlength=n_labels)
    predicted_n = np.bincount(predicted, minlength=n_labels)
    true_pos = np.bincount(expected[expected == predicted], minlength=n_labels)
    per_label: dict[str, dict[str, Any]] = {}
    present_f1: list[float] = []
    for k, label in enumerate(labels):
        tp, n_pred, n_true = int(true_pos[k]), int(predicted_n[k]), int(support[k])
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_true if n_true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_label[label] = {"precision": precision, "recall": recall, "f1": f1, "support": n_true}
        if n_true or n_pred:
            present_f1.append(f1)
    ordinal_mae = None
    if decision_type == "score" and n:
        ordinal_mae = int(np.abs(predicted - expected).sum()) / n
    return {
        "n": n,
        "accuracy": int((expected == predicted).sum()) / n if n else None,
        "macro_f1": exact_mean(np.asarray(present_f1)),
        "per_label": per_label if n else {},
        "ordinal_mae": ordinal_mae,
    }


def _calibration(
    probabilities: npt.NDArray[np.float64],
    expected: npt.NDArray[np.int64],
    confidence: npt.NDArray[np.float64],
    correct: npt.NDArray[np.bool_],
    n_bins: int,
) -> Metrics:
    rows = np.arange(len(expected))
    one_hot = np.zeros_like(probabilities)
    one_hot[rows, expected] = 1.0
    brier_terms = row_sums((probabilities - one_hot) ** 2)
    nll_terms = -np.log(np.maximum(probabilities[rows, expected], NLL_FLOOR))
    bins, ece = reliability(confidence, correct, n_bins)
    return {
        "n": len(expected),
        "ece": ece,
        "brier": exact_mean(brier_terms),
        "nll": exact_mean(nll_terms),
        "bins": n_bins,
        "reliability": bins,
    }


def _selective(
    threshold: float,
    confidence: npt.NDArray[np.float64],
    labeled: npt.NDArray[np.bool_],
    correct_all: npt.NDArray[np.bool_],
) -> Metrics:
    covered = confidence >= threshold
    n = len(confidence)
    coverage = int(covered.sum()) / n if n else None
    covered_labeled = covered & labeled
    n_covered_labeled = int(covered_labeled.sum())
    n_right = int((covered_labeled & correct_all).sum())
    return {
        "threshold": float(threshold),
        "n": n,
        "coverage": coverage,
        "abstention_rate": None if coverage is None else 1.0 - coverage,
        "selective_accuracy": n_right / n_covered_labeled if n_covered_labeled else None,
        "n_covered_labeled": n_covered_labeled,
    }


def _latency(latency_ms: npt.NDArray[np.float64]) -> Metrics:
    p50, p90, p95, p99 = percentiles(latency_ms, LATENCY_PERCENTILES)
    return {
        "n": len(latency_ms),
        "mean_ms": exact_mean(latency_ms),
        "p50_ms": p50,
        "p90_ms": p90,
        "p95_ms": p95,
        "p99_ms": p99,
        "max_ms": float(latency_ms.max()) if len(latency_ms) else None,
    }


def _counts(
    errored: npt.NDArray[np.bool_], labeled: int, error_kinds: Sequence[str | None]
) -> Metrics:
    total = len(errored)
    kinds = np.asarray(error_kinds, dtype=object)[errored].astype(str)
    names, per_kind = np.unique(kinds, return_counts=True)
    n_errored = int(errored.sum())
    return {
        "total": total,
        "succeeded": total - n_errored,
        "errored": n_errored,
        "labeled": labeled,
        "errors_by_kind": {str(k): int(c) for k, c in zip(names, per_kind, strict=True)},
        "error_rate": n_errored / total if total else 0.0,
    }


def golden_metrics(
    *,
    labels: Sequence[str],
    decision_type: str,
    probabilities: npt.NDArray[np.float64],
    errored: npt.NDArray[np.bool_],
    expected_index: npt.NDArray[np.int64],
    latency_ms: npt.NDArray[np.float64],
    error_kinds: Sequence[str | None],
    calibration_bins: int,
    confidence_threshold: float | None,
) -> Metrics:
    """The report's ``metrics`` object: counts, classification, calibration, selective
    (None without a confidence threshold) and latency.

    ``probabilities`` is n x len(labels) in canonical label order (rows of errored cases are
    ignored), ``expected_index`` is -1 for unlabeled cases, ``error_kinds`` holds the kind of
    each errored case (other entries are ignored).
    """
    errored = np.asarray(errored, dtype=bool)
    decided = ~errored
    probs = np.asarray(probabilities, dtype=np.float64).reshape(len(errored), len(labels))
    probs = probs[decided]
    expected_all = np.asarray(expected_index, dtype=np.int64)[decided]
    selected_all, confidence_all = selected_and_confidence(probs)
    labeled = expected_all >= 0
    correct_all = selected_all == expected_all
    expected = expected_all[labeled]
    predicted = selected_all[labeled]
    return {
        "counts": _counts(errored, int(labeled.sum()), error_kinds),
        "classification": _classification(labels, decision_type, expected, predicted),
        "calibration": _calibration(
            probs[labeled],
            expected,
            confidence_all[labeled],
            correct_all[labeled],
            calibration_bins,
        ),
        "selective": None
        if confidence_threshold is None
        else _selective(confidence_threshold, confidence_all, labeled, correct_all),
        "latency": _latency(np.asarray(latency_ms, dtype=np.float64)[decided]),
    }


def metric_value(metrics: Metrics, name: str) -> float | None:
    """The value of golden metric `name` where the golden gate reading it says it sits:
    e.g. ``coverage`` is None when there is no selective section."""
    section_name, key = next(gate.path for gate in GOLDEN_GATES.entries()
                             if gate.metric == name)
    section = metrics.get(section_name)
    return None if section is None else section.get(key)
