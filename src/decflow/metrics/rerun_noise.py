"""Placebo pairs from reruns: how much a model differs from itself, case by case.

When nothing changed, a case's baseline answer B and candidate answer C are two draws from
the same per-case answer distribution, and so are C and any rerun R of the same request:
the pair (C, R) is exchangeable with (B, C). Comparing each side's answer with its own
reruns therefore gives, per case, what the diff would show from noise alone: the share of
placebo pairs that flipped, their mean TV distance and absolute confidence change, and the
mean squared change of each per-case score (correctness, Brier, NLL) — the variance a
paired difference of that score has under no change. Baseline and candidate reruns are
pooled: under no change both sides draw from the same distributions.

A case without any decided rerun has no placebo (NaN everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from decflow.metrics.compare import compare
from decflow.metrics.golden_metrics import NLL_FLOOR

FloatArray = np.ndarray


@dataclass(frozen=True)
class Placebo:
    """Per case (rows of the compared cases): mean over its placebo pairs; NaN without."""

    pairs: np.ndarray  # placebo pairs per case (0 without reruns)
    flip: FloatArray  # share of pairs whose selected label differs
    tv: FloatArray  # mean TV distance
    confidence: FloatArray  # mean |confidence change|
    correct_sq: FloatArray  # mean (Δ correct)², NaN for unlabeled cases
    brier_sq: FloatArray  # mean (Δ Brier)²
    nll_sq: FloatArray  # mean (Δ NLL)²

    @property
    def measured(self) -> np.ndarray:
        return self.pairs > 0


def case_scores(
    probabilities: FloatArray, expected: np.ndarray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per row: correct (1/0), Brier and NLL against `expected` (NaN where unlabeled)."""
    n, width = probabilities.shape
    labeled = expected >= 0
    rows = np.arange(n)
    target = np.where(labeled, expected, 0)
    one_hot = np.zeros((n, width))
    one_hot[rows, target] = 1.0
    selected = np.argmax(probabilities, axis=1) if n else np.zeros(0, dtype=np.int64)
    correct = np.where(labeled, (selected == target).astype(float), np.nan)
    brier = np.where(labeled, ((probabilities - one_hot) ** 2).sum(axis=1), np.nan)
    nll = np.where(labeled, -np.log(np.maximum(probabilities[rows, target], NLL_FLOOR)),
                   np.nan)
    return correct, brier, nll


def _pairs(
    anchors: FloatArray, case_ids: Sequence[str], reruns: Mapping[str, FloatArray]
) -> tuple[np.ndarray, FloatArray, FloatArray]:
    """(owner row, anchor rows, rerun rows) of every placebo pair of one side."""
    found = [reruns.get(case_id) for case_id in case_ids]
    lengths = np.array([0 if f is None else len(f) for f in found], dtype=np.int64)
    if not lengths.sum():
        empty = np.zeros((0, anchors.shape[1]))
        return np.zeros(0, dtype=np.int64), empty, empty
    owner = np.repeat(np.arange(len(case_ids)), lengths)
    return owner, anchors[owner], np.vstack([f for f in found if f is not None and len(f)])


def placebo(
    case_ids: Sequence[str],
    expected: np.ndarray,
    sides: Sequence[tuple[FloatArray, Mapping[str, FloatArray]]],
) -> Placebo:
    """Placebo pairs of each side's answers (`anchors`, rows in `case_ids` order) with its
    reruns (case id → k × labels), pooled per case."""
    n = len(case_ids)
    owners, left, right = [], [], []
    for anchors, reruns in sides:
        owner, a, r = _pairs(anchors, case_ids, reruns)
        owners.append(owner)
        left.append(a)
        right.append(r)
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    width = sides[0][0].shape[1] if sides else 0
    a = np.vstack(left) if left else np.zeros((0, width))
    r = np.vstack(right) if right else np.zeros((0, width))
    pairs = np.bincount(owner, minlength=n)
    shift = compare(a, r, relation="invariant", decision_type="choice")
    labels = expected[owner]
    scores_a, scores_r = case_scores(a, labels), case_scores(r, labels)
    with np.errstate(invalid="ignore", divide="ignore"):

        def mean(values: FloatArray) -> FloatArray:
            present = ~np.isnan(values)
            total = np.bincount(owner[present], weights=values[present], minlength=n)
            count = np.bincount(owner[present], minlength=n)
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

        return Placebo(
            pairs=pairs,
            flip=mean(shift.flipped.astype(float)),
            tv=mean(shift.tv),
            confidence=mean(np.abs(shift.confidence_delta)),
            correct_sq=mean((scores_a[0] - scores_r[0]) ** 2),
            brier_sq=mean((scores_a[1] - scores_r[1]) ** 2),
            nll_sq=mean((scores_a[2] - scores_r[2]) ** 2),
        )
