"""Distribution comparisons and per-case judging (formulas and message formats of ref (e))."""

from __future__ import annotations

import math

import numpy as np
import pytest

from decflow.metrics.compare import Limits, compare, judge, level_decrease


def _one(p: list[float], q: list[float], **kwargs: str) -> dict[str, object]:
    kwargs.setdefault("relation", "invariant")
    kwargs.setdefault("decision_type", "choice")
    labels = [f"l{i}" for i in range(len(p))]
    return compare(np.array([p]), np.array([q]), **kwargs).row(0, labels)


def _js_bits(p: list[float], q: list[float]) -> float:
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]

    def kl(x: list[float]) -> float:
        return sum(a * math.log2(a / c) for a, c in zip(x, m, strict=True) if a > 0)

    return 0.5 * kl(p) + 0.5 * kl(q)


def test_distances_of_a_complete_swap() -> None:
    row = _one([1.0, 0.0], [0.0, 1.0])
    assert row["tv_distance"] == 1.0
    assert row["js_divergence"] == pytest.approx(1.0)
    assert row["max_abs_delta"] == 1.0
    assert row["confidence_delta"] == 0.0  # q[after] - p[before] = 1 - 1
    assert row["flipped"] and row["rank_changed"]
    assert row["level_delta"] is None


def test_js_is_in_bits_and_tv_is_half_the_l1_distance() -> None:
    p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    row = _one(p, q)
    assert row["js_divergence"] == pytest.approx(_js_bits(p, q), rel=1e-12)
    assert row["tv_distance"] == pytest.approx(0.3)
    assert row["max_abs_delta"] == pytest.approx(0.3)
    assert row["selected_before"] == "l0" and row["selected_after"] == "l2"


def test_ties_select_the_first_label_and_rank_in_canonical_order() -> None:
    row = _one([0.4, 0.4, 0.2], [0.4, 0.4, 0.2])
    assert row["selected_before"] == row["selected_after"] == "l0"
    assert not row["flipped"] and not row["rank_changed"]
    swapped_tie = _one([0.4, 0.4, 0.2], [0.39, 0.41, 0.2])
    assert swapped_tie["rank_changed"] and swapped_tie["flipped"]


def test_swapped_relation_measures_the_gap_from_the_inverted_answer() -> None:
    inverted = _one([0.9, 0.1], [0.1, 0.9], relation="swapped", decision_type="noul")
    assert inverted["tv_distance"] == 0.0 and not inverted["flipped"]
    stuck = compare(
        np.array([[0.9, 0.1]]), np.array([[0.9, 0.1]]), relation="swapped", decision_type="noul"
    )
    verdict = judge(stuck, Limits(max_flip_rate=0.0), relation="swapped", labels=["spam", "ham"])
    assert stuck.flipped[0]
    assert verdict.violations == [
        ["answer did not invert: 'spam' was selected before and after negation"]
    ]
    with pytest.raises(ValueError):
        compare(
            np.ones((1, 3)) / 3, np.ones((1, 3)) / 3, relation="swapped", decision_type="choice"
        )


def test_limits_are_strict_and_use_the_reference_formats() -> None:
    # Binary fractions keep the arithmetic exact: row 0 sits exactly at the limits.
    p = np.array([[0.75, 0.25], [0.75, 0.25]])
    q = np.array([[0.5, 0.5], [0.125, 0.875]])
    found = compare(p, q, relation="invariant", decision_type="noul")
    limits = Limits(max_tv_distance=0.25, max_abs_delta=0.25, max_confidence_delta=0.25)
    verdict = judge(found, limits, relation="invariant", labels=["yes", "no"])
    assert found.tv[0] == 0.25
    assert verdict.violations[0] == []
    assert verdict.violations[1] == [
        "tv_distance 0.625 > 0.25",
        "max_abs_delta 0.625 > 0.25",
    ]
    assert list(verdict.limit_violated) == [False, True]
    assert not verdict.flip_violated.any()  # no max_flip_rate: flips are not violations


def test_confidence_limit_compares_the_absolute_delta() -> None:
    found = compare(
        np.array([[0.9, 0.1]]), np.array([[0.6, 0.4]]), relation="invariant", decision_type="noul"
    )
    assert found.confidence_delta[0] == pytest.approx(-0.3)
    verdict = judge(
        found, Limits(max_confidence_delta=0.25), relation="invariant", labels=["a", "b"]
    )
    assert verdict.violations == [["confidence_delta 0.3 > 0.25"]]


def test_flip_messages_follow_limit_messages() -> None:
    found = compare(
        np.array([[0.7, 0.3]]), np.array([[0.2, 0.8]]), relation="invariant", decision_type="noul"
    )
    limits = Limits(max_tv_distance=0.03, max_flip_rate=0.0)
    verdict = judge(found, limits, relation="invariant", labels=["a", "b"])
    assert verdict.violations == [["tv_distance 0.5 > 0.03", "selected label changed: 'a' -> 'b'"]]
    assert verdict.flip_violated[0] and verdict.limit_violated[0]


def test_monotonic_level_delta_and_messages() -> None:
    levels = ["1", "2", "3", "4"]
    p = np.array([[0.0, 0.0, 1.0, 0.0]])
    q = np.array([[0.0, 0.8, 0.2, 0.0]])
    found = compare(p, q, relation="monotonic", decision_type="score", direction="increasing")
    assert found.level_delta is not None
    assert found.level_delta[0] == pytest.approx(-0.8)
    assert found.flipped[0]  # selected level 3 -> 2 moved against 'increasing'
    limits = Limits(max_level_decrease=0.05, max_flip_rate=0.0)
    verdict = judge(found, limits, relation="monotonic", labels=levels, direction="increasing")
    assert verdict.violations == [
        [
            "expected level moved -0.8 against 'increasing' (allowed 0.05)",
            "selected level moved against 'increasing': 3 -> 2",
        ]
    ]
    assert level_decrease(found, "increasing")[0] == pytest.approx(0.8)
    down = compare(p, q, relation="monotonic", decision_type="score", direction="decreasing")
    assert not down.flipped[0]
    calm = judge(down, limits, relation="monotonic", labels=levels, direction="decreasing")
    assert calm.violations == [[]]
    assert level_decrease(down, "decreasing")[0] == 0.0


def test_empty_columns() -> None:
    found = compare(
        np.zeros((0, 3)), np.zeros((0, 3)), relation="invariant", decision_type="choice"
    )
    assert len(found) == 0
    verdict = judge(
        found, Limits(max_tv_distance=0.1), relation="invariant", labels=["a", "b", "c"]
    )
    assert verdict.violations == []


def test_limits_from_a_property_config() -> None:
    from types import SimpleNamespace

    config = SimpleNamespace(max_tv_distance=0.03, max_flip_rate=0.0, max_level_decrease=0.1)
    assert Limits.of(config, "invariant").per_case() == [("max_tv_distance", 0.03)]
    assert Limits.of(config, "monotonic").per_case() == [("max_level_decrease", 0.1)]
