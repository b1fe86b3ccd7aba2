"""Regression diff of two result sets (DecGuard 0.1 `diff` semantics).

A result set is the `results[]` list of a run report (decflow or DecGuard 0.1): per case
`case_id`, `input`, `expected`, `metadata`, and either `result` (probabilities in contract
order, selected, confidence, latency_ms) or `error` {kind, message}. Cases are matched by
id in the candidate's order. Distribution shifts come from `metrics.compare` over the cases
both sides decided; golden metrics are recomputed for each side over the matched cases
(each side's own errors included) with `metrics.golden`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from decflow.contracts.gates import GoldenGate
from decflow.metrics.compare import compare
from decflow.metrics.golden_cases import CaseValues, gate_metrics
from decflow.metrics.golden_metrics import golden_metrics, metric_value
from decflow.metrics.numeric import percentiles, row_sums
from decflow.metrics.regression_evidence import PairedDiff, SegmentRows
from decflow.metrics.rerun_noise import placebo

MISSING_SEGMENT = "(missing)"
DIFF_METRICS = (
    "accuracy",
    "macro_f1",
    "ordinal_mae",
    "ece",
    "brier",
    "nll",
    "coverage",
    "error_rate",
    "latency_p50_ms",
    "latency_p95_ms",
)


@dataclass(frozen=True)
class Side:
    """One side's matched cases as columns (candidate order)."""

    probabilities: np.ndarray  # n x L, NaN rows for errored cases
    errored: np.ndarray
    expected: np.ndarray  # label index, -1 when unlabeled
    latency_ms: list[float | None]
    error_kinds: list[str | None]

    @property
    def selected(self) -> np.ndarray:
        filled = np.where(np.isnan(self.probabilities), -np.inf, self.probabilities)
        return np.argmax(filled, axis=1) if len(filled) else np.zeros(0, dtype=np.int64)


def _side(cases: Sequence[dict[str, Any]], labels: tuple[str, ...]) -> Side:
    index = {label: i for i, label in enumerate(labels)}
    probabilities = np.full((len(cases), len(labels)), np.nan)
    errored = np.zeros(len(cases), dtype=bool)
    latency: list[float | None] = []
    kinds: list[str | None] = []
    for i, case in enumerate(cases):
        result = case.get("result")
        if result is None:
            errored[i] = True
            latency.append(None)
            kinds.append((case.get("error") or {}).get("kind", "exception"))
            continue
        probabilities[i] = [result["probabilities"][label] for label in labels]
        latency.append(result.get("latency_ms"))
        kinds.append(None)
    expected = np.array(
        [index.get(c["expected"], -1) if c.get("expected") is not None else -1 for c in cases],
        dtype=np.int64,
    )
    return Side(probabilities, errored, expected, latency, kinds)


def _side_metrics(side: Side, settings: DiffSettings) -> dict[str, float | None]:
    metrics = golden_metrics(
        labels=settings.labels,
        decision_type=settings.decision_type,
        probabilities=side.probabilities,
        errored=side.errored,
        expected_index=side.expected,
        latency_ms=np.zeros(len(side.errored)),  # latency below: it may be missing
        error_kinds=side.error_kinds,
        calibration_bins=settings.calibration_bins,
        confidence_threshold=settings.confidence_threshold,
    )
    values = {name: metric_value(metrics, name) for name in DIFF_METRICS[:-2]}
    measured = [v for v in side.latency_ms if v is not None]
    values["latency_p50_ms"], values["latency_p95_ms"] = percentiles(measured, (50, 95))
    return values


def side_values(side: Side, threshold: float | None, calibration_bins: int) -> CaseValues:
    """One side's matched cases as the golden gates read them."""
    latency = np.array([np.nan if v is None else v for v in side.latency_ms], dtype=float)
    arrays = {"probabilities": side.probabilities, "errored": side.errored,
              "expected_index": side.expected, "latency_ms": latency}
    return CaseValues.of(arrays, side.probabilities.shape[1], threshold, calibration_bins)


def _gate_metrics(side: Side, gates: Sequence[GoldenGate], settings: DiffSettings
                  ) -> dict[str, float | None]:
    """One side's metrics of extension golden gates (each its per-case ratio)."""
    return gate_metrics(gates, side_values(side, settings.confidence_threshold,
                                           settings.calibration_bins))


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _mean(values: np.ndarray) -> float | None:
    return math.fsum(values.tolist()) / values.size if values.size else None


def _max(values: np.ndarray) -> float | None:
    return float(values.max()) if values.size else None


def segment_label(metadata: dict[str, Any] | None, key: str) -> str:
    """The group of a case: strings as is, other JSON values as sorted-key JSON."""
    if not metadata or key not in metadata:
        return MISSING_SEGMENT
    value = metadata[key]
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _accuracy(side: Side, rows: np.ndarray) -> float | None:
    mask = np.zeros(len(side.errored), dtype=bool)
    mask[rows] = True
    labeled = mask & ~side.errored & (side.expected >= 0)
    n = int(labeled.sum())
    return int((side.selected[labeled] == side.expected[labeled]).sum()) / n if n else None


def matched_sides(
    baseline: Sequence[dict[str, Any]], candidate: Sequence[dict[str, Any]],
    labels: tuple[str, ...],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Side, Side]:
    """The cases both reports hold (candidate order) and each side's columns over them."""
    by_id = {case["case_id"]: case for case in baseline}
    matched_candidate = [case for case in candidate if case["case_id"] in by_id]
    matched_baseline = [by_id[case["case_id"]] for case in matched_candidate]
    return (matched_baseline, matched_candidate, _side(matched_baseline, labels),
            _side(matched_candidate, labels))


def paired_sides(
    case_ids: Sequence[str],
    old: Side,
    new: Side,
    *,
    reruns: tuple[Mapping[str, np.ndarray] | None, Mapping[str, np.ndarray] | None],
    calibration_bins: int,
    confidence_threshold: float | None = None,
) -> PairedDiff:
    """The paired evidence over the matched cases `case_ids` (the sides' rows) that both
    sides decided, with each side's reruns by case id (None: not measured); the golden
    gates' per-case values of every matched case with `confidence_threshold`."""
    rows = np.flatnonzero(~old.errored & ~new.errored)
    ids = [case_ids[i] for i in rows.tolist()]
    expected = new.expected[rows]
    sides = [(side.probabilities[rows], found) for side, found in
             zip((old, new), reruns, strict=True) if found is not None]
    noise = placebo(ids, expected, sides) if sides else None
    values = (side_values(old, confidence_threshold, calibration_bins),
              side_values(new, confidence_threshold, calibration_bins))
    return PairedDiff(old.probabilities[rows], new.probabilities[rows], expected, noise,
                      errored_before=old.errored, errored_after=new.errored,
                      calibration_bins=calibration_bins, values=values)


def paired_diff(
    baseline: Sequence[dict[str, Any]],
    candidate: Sequence[dict[str, Any]],
    settings: DiffSettings,
    *,
    reruns_before: Mapping[str, np.ndarray] | None,
    reruns_after: Mapping[str, np.ndarray] | None,
    segment_by: Sequence[str] = (),
    min_segment_size: int = 5,
) -> tuple[PairedDiff, list[SegmentRows]]:
    """The paired evidence of a diff (`metrics.regression_evidence`) and its segments'
    rows among the compared cases. `reruns_*`: each run's reruns by case id (None: not
    measured)."""
    _, matched, old, new = matched_sides(baseline, candidate, settings.labels)
    ids = [case["case_id"] for case in matched]
    paired = paired_sides(ids, old, new, reruns=(reruns_before, reruns_after),
                          calibration_bins=settings.calibration_bins,
                          confidence_threshold=settings.confidence_threshold)
    rows = np.flatnonzero(~old.errored & ~new.errored)
    segments = []
    for key in segment_by:
        values = np.array([segment_label(matched[i].get("metadata"), key) for i in range(
            len(matched))], dtype=object)
        for value in sorted(set(values.tolist())):
            members = values == value
            segments.append(SegmentRows(key, value, np.flatnonzero(members[rows]),
                                        bool(members.sum() >= min_segment_size)))
    return paired, segments


@dataclass(frozen=True)
class DiffSettings:
    """What a diff's metrics are computed with: the decision and its evaluation settings."""

    labels: tuple[str, ...]
    decision_type: str
    calibration_bins: int
    confidence_threshold: float | None


def diff_results(
    baseline: Sequence[dict[str, Any]],
    candidate: Sequence[dict[str, Any]],
    settings: DiffSettings,
    *,
    segment_by: Sequence[str] = (),
    min_segment_size: int = 5,
    gates: Sequence[GoldenGate] = (),
) -> dict[str, Any]:
    """`counts`, `shift`, `metrics`, `segments` and `changes` of a regression diff;
    `gates`: extension golden gates whose metric is diffed too (their diff gate is set)."""
    labels, decision_type = settings.labels, settings.decision_type
    candidate_ids = {case["case_id"] for case in candidate}
    matched_baseline, matched_candidate, old, new = matched_sides(baseline, candidate, labels)
    compared = np.flatnonzero(~old.errored & ~new.errored)
    before_p, after_p = old.probabilities[compared], new.probabilities[compared]
    shift = compare(before_p, after_p, relation="invariant", decision_type=decision_type)
    # DecGuard's diff sums |p - q| over labels with fsum (the property comparisons do not).
    tv = 0.5 * row_sums(np.abs(before_p - after_p)) if compared.size else np.zeros(0)
    flips = np.zeros(len(old.errored), dtype=bool)
    flips[compared] = shift.flipped
    labeled = new.expected >= 0
    old_right = ~old.errored & (old.selected == old.expected) & (old.expected >= 0)
    new_right = ~new.errored & (new.selected == new.expected) & labeled
    both = ~old.errored & ~new.errored
    counts = {
        "baseline_cases": len(baseline),
        "candidate_cases": len(candidate),
        "matched": len(matched_candidate),
        "only_in_baseline": sum(1 for case in baseline if case["case_id"] not in candidate_ids),
        "only_in_candidate": len(candidate) - len(matched_candidate),
        "compared": int(compared.size),
        "answer_flips": int(flips.sum()),
        "newly_wrong": int((both & labeled & old_right & ~new_right).sum()),
        "newly_correct": int((both & labeled & ~old_right & new_right).sum()),
        "newly_errored": int((~old.errored & new.errored).sum()),
        "recovered": int((old.errored & ~new.errored).sum()),
        "still_errored": int((old.errored & new.errored).sum()),
    }
    abs_delta = np.abs(shift.confidence_delta)
    shift_values = {
        "answer_flip_rate": counts["answer_flips"] / compared.size if compared.size else None,
        "mean_tv_distance": _mean(tv),
        "max_tv_distance": _max(tv),
        "mean_js_divergence": _mean(shift.js),
        "mean_confidence_delta": _mean(shift.confidence_delta),
        "mean_abs_confidence_delta": _mean(abs_delta),
        "max_abs_confidence_delta": _max(abs_delta),
    }
    before, after = _side_metrics(old, settings), _side_metrics(new, settings)
    if gates:
        before.update(_gate_metrics(old, gates, settings))
        after.update(_gate_metrics(new, gates, settings))
    metrics = {
        name: {"baseline": before[name], "candidate": after[name],
               "delta": _delta(before[name], after[name])}
        for name in [*DIFF_METRICS, *(gate.metric for gate in gates)]
    }
    tv_by_row = np.full(len(old.errored), np.nan)
    tv_by_row[compared] = tv
    return {
        "counts": counts,
        "shift": shift_values,
        "metrics": metrics,
        "segments": _segments(
            matched_candidate, old, new, flips, both, segment_by, min_segment_size
        ),
        "changes": _changes(matched_baseline, matched_candidate, old, new, flips, tv_by_row),
    }


def _segments(
    cases: Sequence[dict[str, Any]],
    old: Side,
    new: Side,
    flips: np.ndarray,
    both: np.ndarray,
    segment_by: Sequence[str],
    min_size: int,
) -> list[dict[str, Any]]:
    out = []
    for key in segment_by:
        values = [segment_label(case.get("metadata"), key) for case in cases]
        for value in sorted(set(values)):
            rows = np.flatnonzero(np.array(values) == value)
            n_compared = int(both[rows].sum())
            before, after = _accuracy(old, rows), _accuracy(new, rows)
            out.append(
                {
                    "key": key,
                    "value": value,
                    "matched": int(rows.size),
                    "compared": n_compared,
                    "baseline_accuracy": before,
                    "candidate_accuracy": after,
                    "accuracy_drop": None if before is None or after is None else before - after,
                    "answer_flip_rate": int(flips[rows].sum()) / n_compared
                    if n_compared
                    else None,
                    "gated": bool(rows.size >= min_size),
                }
            )
    return out


def _changes(
    old_cases: Sequence[dict[str, Any]],
    new_cases: Sequence[dict[str, Any]],
    old: Side,
    new: Side,
    flips: np.ndarray,
    tv: np.ndarray,
) -> list[dict[str, Any]]:
    """Every flip, newly errored and recovered case, in candidate order."""
    kinds = np.where(
        flips, "flip", np.where(~old.errored & new.errored, "newly_errored",
                                np.where(old.errored & ~new.errored, "recovered", ""))
    )
    out = []
    for i in np.flatnonzero(kinds != "").tolist():
        before, after = old_cases[i], new_cases[i]
        error_side = after if kinds[i] == "newly_errored" else before
        error = error_side.get("error") if kinds[i] != "flip" else None
        out.append(
            {
                "case_id": after["case_id"],
                "kind": str(kinds[i]),
                "input": after.get("input"),
                "expected": after.get("expected"),
                "baseline_selected": _pick(before, "selected"),
                "candidate_selected": _pick(after, "selected"),
                "baseline_confidence": _pick(before, "confidence"),
                "candidate_confidence": _pick(after, "confidence"),
                "tv_distance": None if math.isnan(tv[i]) else float(tv[i]),
                "error": None if error is None else f"{error['kind']}: {error['message']}",
            }
        )
    return out


def _pick(case: dict[str, Any], key: str) -> Any:
    result = case.get("result")
    return None if result is None else result.get(key)
