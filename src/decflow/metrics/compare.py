"""Distribution comparisons of transformed cases with their originals, over whole columns.

P and Q are n × L arrays over contract labels in canonical order (Q already mapped back
from the shown labels). Sums over labels run column by column, left to right, so each row
is summed in the same order as a plain per-case loop would (reproducible to the last bit).

Relations: `invariant` (the answer must not change), `swapped` (noul inversion: Q's two
labels are exchanged before everything, so distances measure the gap from the perfectly
inverted answer and `flipped` means "did not invert"), `monotonic` (score: the answer must
not move against `direction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from decflow.contracts.properties import PropertyConfig

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]
Bools = NDArray[np.bool_]

# (metric name in messages, limit key): the per-case limits, in the order they are judged.
CASE_LIMITS = (
    ("tv_distance", "max_tv_distance"),
    ("js_divergence", "max_js_divergence"),
    ("max_abs_delta", "max_abs_delta"),
    ("confidence_delta", "max_confidence_delta"),
)


@dataclass(slots=True)
class Comparison:
    """Per-row comparison columns; `level_delta` is None unless the decision is a score."""

    tv: Floats
    js: Floats
    max_abs_delta: Floats
    confidence_delta: Floats
    selected_before: Ints
    selected_after: Ints
    flipped: Bools
    rank_changed: Bools
    level_delta: Floats | None

    def __len__(self) -> int:
        return len(self.tv)

    def columns(self) -> dict[str, Any]:
        """Plain arrays by column name (for Arrow/polars tables)."""
        return {
            "tv": self.tv,
            "js": self.js,
            "max_abs_delta": self.max_abs_delta,
            "confidence_delta": self.confidence_delta,
            "selected_before": self.selected_before,
            "selected_after": self.selected_after,
            "flipped": self.flipped,
            "rank_changed": self.rank_changed,
            "level_delta": self.level_delta,
        }

    def row(self, i: int, labels: Sequence[str]) -> dict[str, Any]:
        """One comparison as stored in reports (selected labels by name)."""
        return {
            "tv_distance": float(self.tv[i]),
            "js_divergence": float(self.js[i]),
            "max_abs_delta": float(self.max_abs_delta[i]),
            "confidence_delta": float(self.confidence_delta[i]),
            "selected_before": labels[self.selected_before[i]],
            "selected_after": labels[self.selected_after[i]],
            "flipped": bool(self.flipped[i]),
            "rank_changed": bool(self.rank_changed[i]),
            "level_delta": None if self.level_delta is None else float(self.level_delta[i]),
        }


def _row_sum(values: Floats) -> Floats:
    total = values[:, 0].copy()
    for j in range(1, values.shape[1]):
        total += values[:, j]
    return total


def _kl_to(p: Floats, m: Floats) -> Floats:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log2(p / m), 0.0)
    return _row_sum(terms)


def compare(
    p: Floats,
    q: Floats,
    *,
    relation: str,
    decision_type: str,
    direction: str = "increasing",
) -> Comparison:
    """Compare originals P with transformed Q row by row (both n × L, canonical order)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 2:
        raise ValueError(f"P and Q must be n × L arrays of one shape, got {p.shape}, {q.shape}")
    if relation == "swapped":
        if q.shape[1] != 2:
            raise ValueError("the swapped relation needs exactly two labels (noul decisions)")
        q = q[:, ::-1]
    n = p.shape[0]
    rows = np.arange(n)
    diff = np.abs(p - q)
    m = (p + q) / 2
    before = np.argmax(p, axis=1) if n else np.zeros(0, dtype=np.int64)
    after = np.argmax(q, axis=1) if n else np.zeros(0, dtype=np.int64)
    if relation == "monotonic":
        sign = 1 if direction == "increasing" else -1
        flipped = sign * (after - before) < 0
    else:
        flipped = after != before
    level_delta = None
    if decision_type == "score":
        levels = np.arange(p.shape[1], dtype=np.float64)
        level_delta = _row_sum(q * levels) - _row_sum(p * levels)
    return Comparison(
        tv=np.minimum(0.5 * _row_sum(diff), 1.0) if n else np.zeros(0),
        js=np.clip(0.5 * _kl_to(p, m) + 0.5 * _kl_to(q, m), 0.0, 1.0) if n else np.zeros(0),
        max_abs_delta=diff.max(axis=1) if n else np.zeros(0),
        confidence_delta=q[rows, after] - p[rows, before],
        selected_before=before.astype(np.int64),
        selected_after=after.astype(np.int64),
        flipped=np.asarray(flipped, dtype=bool),
        rank_changed=(
            np.any(
                np.argsort(-p, axis=1, kind="stable") != np.argsort(-q, axis=1, kind="stable"),
                axis=1,
            )
            if n
            else np.zeros(0, dtype=bool)
        ),
        level_delta=level_delta,
    )


@dataclass(frozen=True, slots=True)
class Limits:
    """A property's per-case limits and flip-rate setting (None = not set)."""

    max_tv_distance: float | None = None
    max_js_divergence: float | None = None
    max_abs_delta: float | None = None
    max_confidence_delta: float | None = None
    max_flip_rate: float | None = None
    max_level_decrease: float | None = None

    @classmethod
    def of(cls, config: PropertyConfig, relation: str) -> Limits:
        """The limits of a contract property config (monotonic judges only the level)."""
        if relation == "monotonic":
            return cls(
                max_flip_rate=getattr(config, "max_flip_rate", None),
                max_level_decrease=getattr(config, "max_level_decrease", 0.0),
            )
        return cls(
            **{key: getattr(config, key, None) for _name, key in CASE_LIMITS},
            max_flip_rate=getattr(config, "max_flip_rate", None),
        )

    def per_case(self) -> list[tuple[str, float]]:
        """The per-case limits that are set, as (limit key, value), in judging order."""
        keys = [key for _name, key in CASE_LIMITS] + ["max_level_decrease"]
        return [(key, getattr(self, key)) for key in keys if getattr(self, key) is not None]


@dataclass(slots=True)
class Judgement:
    limit_violated: Bools  # broke a per-case limit (counted in the violation rate)
    flip_violated: Bools  # flipped while max_flip_rate is set (a violation, not counted)
    violations: list[list[str]]


def judge(
    comparison: Comparison,
    limits: Limits,
    *,
    relation: str,
    labels: Sequence[str],
    direction: str = "increasing",
) -> Judgement:
    """Per-case violations (strict `>`), with DecGuard's message formats."""
    n = len(comparison)
    # one shared empty list for the cases that break nothing (most): a case that breaks a
    # limit gets a list of its own as its first message is added, the shared one is never
    # changed
    messages: list[list[str]] = [[]] * n
    limit_violated = np.zeros(n, dtype=bool)
    values = {
        "max_tv_distance": comparison.tv,
        "max_js_divergence": comparison.js,
        "max_abs_delta": comparison.max_abs_delta,
        "max_confidence_delta": np.abs(comparison.confidence_delta),
    }
    for name, key in CASE_LIMITS:
        limit = getattr(limits, key)
        if limit is None:
            continue
        broken = values[key] > limit
        limit_violated |= broken
        for i in np.flatnonzero(broken).tolist():
            messages[i] = [*messages[i], f"{name} {values[key][i]:.4g} > {limit:g}"]
    if relation == "monotonic" and limits.max_level_decrease is not None:
        if comparison.level_delta is None:
            raise ValueError("monotonic comparisons need score decisions (level_delta)")
        sign = 1.0 if direction == "increasing" else -1.0
        allowed = limits.max_level_decrease
        broken = sign * comparison.level_delta < -allowed
        limit_violated |= broken
        for i in np.flatnonzero(broken).tolist():
            moved = comparison.level_delta[i]
            messages[i] = [
                *messages[i],
                f"expected level moved {moved:.4g} against '{direction}' (allowed {allowed:g})",
            ]
    flip_violated = np.zeros(n, dtype=bool)
    if limits.max_flip_rate is not None:
        flip_violated = comparison.flipped.copy()
        for i in np.flatnonzero(flip_violated).tolist():
            messages[i] = [*messages[i],
                           _flip_message(comparison, i, relation, labels, direction)]
    return Judgement(limit_violated, flip_violated, messages)


def _flip_message(
    comparison: Comparison, i: int, relation: str, labels: Sequence[str], direction: str
) -> str:
    before = labels[comparison.selected_before[i]]
    after = labels[comparison.selected_after[i]]
    if relation == "swapped":
        return f"answer did not invert: '{before}' was selected before and after negation"
    if relation == "monotonic":
        return f"selected level moved against '{direction}': {before} -> {after}"
    return f"selected label changed: '{before}' -> '{after}'"


def level_decrease(comparison: Comparison, direction: str) -> Floats:
    """Per row, how far the expected level moved against the direction (0 when it did not)."""
    if comparison.level_delta is None:
        raise ValueError("level decrease needs score decisions")
    sign = 1.0 if direction == "increasing" else -1.0
    return np.maximum(0.0, -sign * comparison.level_delta)
