"""The exact sign test and Holm against the hand-computed numbers in
reference/stability-and-decision-flip.md."""

from __future__ import annotations

import pytest

from decflow.metrics.stats import holm, sign_test


def test_exact_tests_reference_values() -> None:
    assert sign_test(6, 0) == pytest.approx(0.03125)
    assert sign_test(6, 1) == pytest.approx(0.125)
    assert sign_test(8, 0) == pytest.approx(0.0078125)
    assert sign_test(8, 0) < 0.05 / 4  # survives Holm's first step over four axes
    assert sign_test(5, 0) == pytest.approx(0.0625)
    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == 1.0
    assert sign_test(0, 6) == sign_test(6, 0)


def test_holm_adjustment() -> None:
    assert holm([]) == []
    assert holm([0.0078125, 0.5, 1.0, 0.2]) == pytest.approx([0.03125, 1.0, 1.0, 0.6])
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.04]) == [0.04]
    # Adjusted values follow the raw order and are capped at 1.
    assert holm([0.3, 0.9, 0.5]) == pytest.approx([0.9, 1.0, 1.0])
