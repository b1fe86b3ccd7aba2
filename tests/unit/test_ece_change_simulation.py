"""`max_ece_increase` in evidence-gated diffs keeps its error rates where the binned ECE's
bias misled the percentile bootstrap (issue 32: a true increase of 0.06 against a limit of
0.05 passed in 27–36 % of diffs at 100–1,000 cases).

Seeded simulations at the statistics layer, 150 paired diffs per scenario, limit 0.05, bound
α + the one-sided binomial 99 % tolerance (0.0914): confidences uniform in [0.5, 1], the
baseline calibrated (right with probability equal to its confidence), the candidate right
with probability confidence − shift on the same cases (one uniform draw decides both, so the
runs are as dependent as a real pair). With every case shifted the same way the candidate's
binned ECE target is exactly the shift, so the increase is 0.06 (1.2× the limit: a PASS is
wrong), 0.05 (at the limit: both verdicts are wrong) or 0 (a calibrated pair: a FAIL is
wrong). Larger runs and the power figures: `bench/ece_change.py` (docs/statistics.md). Run
this module as a script to print the figures.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from decflow.metrics.ece_change import ece_change_test

LIMIT = 0.05
ALPHA = 0.05
DIFFS = 150
BOUND = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / DIFFS)


def verdict_rates(cases: int, shift: float, seed: int, diffs: int = DIFFS) -> tuple[float,
                                                                                  float]:
    """(FAIL share, PASS share) over seeded paired diffs with the candidate `shift`
    overconfident."""
    rng = np.random.default_rng(seed)
    failed = passed = 0
    for _ in range(diffs):
        confidence = rng.uniform(0.5, 1.0, cases)
        draw = rng.random(cases)
        before, after = draw < confidence, draw < confidence - shift
        test = ece_change_test(confidence, before, confidence, after, 10, LIMIT)
        assert test.low is not None and test.high is not None
        failed += test.low > LIMIT
        passed += test.high < LIMIT
    return failed / diffs, passed / diffs


@pytest.mark.parametrize("cases", [200, 1000])
def test_a_real_increase_above_the_limit_is_not_passed(cases: int) -> None:
    _, passed = verdict_rates(cases, 1.2 * LIMIT, seed=cases)
    assert passed <= BOUND


@pytest.mark.parametrize("cases", [200, 1000])
def test_a_calibrated_pair_is_not_failed(cases: int) -> None:
    failed, _ = verdict_rates(cases, 0.0, seed=cases + 1)
    assert failed <= BOUND


def test_at_the_limit_neither_verdict_exceeds_alpha() -> None:
    failed, passed = verdict_rates(1000, LIMIT, seed=3)
    assert failed <= BOUND and passed <= BOUND


if __name__ == "__main__":
    for cases in (200, 1000):
        for shift, name in ((1.2 * LIMIT, "increase 0.06"), (LIMIT, "at the limit"),
                            (0.0, "calibrated pair")):
            failed, passed = verdict_rates(cases, shift, seed=cases)
            print(f"{cases} cases, {name}: FAIL {failed:.3f}, PASS {passed:.3f}")
