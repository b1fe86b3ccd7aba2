"""What each golden case contributes to the golden gates: `CaseValues` (per case: errored,
decided, labeled, correct, covered, Brier, NLL, …) and one function per ratio gate giving
its per-case numerator and denominator (the gate's metric is their ratio) and the largest
numerator per unit of denominator. The golden gate registry names these functions
(`GoldenGate.per_case`); a sequential run tracks each gate's ratio case by case with them,
an extension gate's metric is computed with them, and the composite gates (ECE, macro-F1,
latency p95) are built on the same values (`sequential_composite`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from decflow.contracts.gates import GoldenGate
from decflow.metrics.golden_metrics import NLL_FLOOR, selected_and_confidence
from decflow.registry import imported

Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
# (numerator, denominator, largest numerator per unit of denominator) per case
PerCase = tuple[npt.NDArray[Any], npt.NDArray[Any], float]
NLL_MAX = -math.log(NLL_FLOOR)


@dataclass(frozen=True)
class CaseValues:
    """The golden cases as per-case arrays (in the order given), with what the contract says
    of them: `n_labels`, the confidence threshold (None: every decided case is covered) and
    the calibration bins."""

    errored: Flags
    decided: Flags
    labeled: Flags
    correct: Flags
    covered: Flags
    probabilities: Floats
    selected: npt.NDArray[np.int64]
    confidence: Floats
    expected: npt.NDArray[np.int64]
    brier: Floats
    nll: Floats
    latency_ms: Floats
    n_labels: int
    calibration_bins: int

    @classmethod
    def of(cls, arrays: dict[str, Any], n_labels: int, threshold: float | None,
           calibration_bins: int) -> CaseValues:
        """From the golden arrays of a results table (`golden_section.golden_arrays`)."""
        errored = np.asarray(arrays["errored"], dtype=bool)
        decided = ~errored
        probabilities = np.nan_to_num(np.asarray(arrays["probabilities"], dtype=np.float64)
                                      .reshape(len(errored), n_labels))
        expected = np.asarray(arrays["expected_index"], dtype=np.int64)
        labeled = decided & (expected >= 0)
        selected, confidence = selected_and_confidence(probabilities)
        correct = labeled & (selected == expected)
        rows = np.arange(len(errored))
        truth = np.where(labeled, expected, 0)
        one_hot = np.zeros_like(probabilities)
        one_hot[rows, truth] = 1.0
        brier = np.where(labeled, ((probabilities - one_hot) ** 2).sum(axis=1), 0.0)
        nll = np.where(labeled, -np.log(np.maximum(probabilities[rows, truth], NLL_FLOOR)),
                       0.0)
        covered = decided & (confidence >= threshold) if threshold is not None else decided
        return cls(errored, decided, labeled, correct, covered, probabilities, selected,
                   confidence, expected, brier, nll,
                   np.asarray(arrays["latency_ms"], dtype=np.float64), n_labels,
                   calibration_bins)

    @property
    def everyone(self) -> Floats:
        return np.ones(len(self.errored))


def accuracy(v: CaseValues) -> PerCase:
    return v.correct, v.labeled, 1.0


def nll(v: CaseValues) -> PerCase:
    return v.nll, v.labeled, NLL_MAX


def brier(v: CaseValues) -> PerCase:
    return v.brier, v.labeled, 2.0


def coverage(v: CaseValues) -> PerCase:
    return v.covered, v.decided, 1.0


def abstention(v: CaseValues) -> PerCase:
    return v.decided & ~v.covered, v.decided, 1.0


def selective_accuracy(v: CaseValues) -> PerCase:
    return v.covered & v.correct, v.covered & v.labeled, 1.0


def error_rate(v: CaseValues) -> PerCase:
    return v.errored, v.everyone, 1.0


def ordinal_error(v: CaseValues) -> PerCase:
    return np.abs(v.selected - v.expected) * v.labeled, v.labeled, max(v.n_labels - 1, 1)


def ratio(per_case: PerCase) -> float | None:
    """The metric a per-case ratio gate reads: Σ numerator / Σ denominator (None: an empty
    denominator)."""
    num, den, _ = per_case
    total = float(np.asarray(den, dtype=np.float64).sum())
    return None if total == 0 else float(np.asarray(num, dtype=np.float64).sum()) / total


def gate_metrics(gates: Sequence[GoldenGate], values: CaseValues) -> dict[str, float | None]:
    """The metrics of golden gates whose metric no built-in section holds (extension
    gates): each its per-case ratio over `values`."""
    return {gate.metric: ratio(imported(gate.per_case)(values))
            for gate in gates if gate.per_case is not None}
