"""Evidence-gated regression verdicts keep their stated error rates: seeded simulation.

Two runs of the same noisy model (`tests.support.noisy_model`: rerun flip rate 8 %), the
candidate's noise measured by 2 reruns per case (what the nightly deployment's
`noise_reruns: 2` makes), gated with `max_answer_flip_rate: 0.02` and
`max_accuracy_drop: 0.02` (α = 0.05 per side):

- no change, 200 and 2,000 cases, 400 diffs each: each gate FAILs in at most α plus the
  one-sided binomial 99 % tolerance (0.0753); DecGuard's point rule on the same diffs is
  measured beside it;
- an accuracy drop exactly at the limit (0.02, 1,000 cases): FAIL within the same bound;
- a planted accuracy drop of 0.06 and a planted flip excess of 0.08 over the noise
  (1,000 cases, 200 diffs each): FAIL in ≥ 80 %.

The diffs go through the code a report's diff goes through once its cases are matched
(`metrics.regression.paired_sides`, `gates.regression.gate_evidence`), from each side's
columns and the candidate's rerun map. Run the module as a
script (`python -m tests.unit.test_regression_simulation`) to print the measured rates;
bench/regression_noise.py runs the larger versions recorded in docs/statistics.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from decflow.gates.regression import gate_evidence
from decflow.metrics.regression import paired_sides
from tests.support import noisy_model

ALPHA = 0.05
LIMIT = 0.02
NULL_DIFFS = 400
POWER_DIFFS = 200
GATES = (("max_answer_flip_rate", "answer_flip_rate"), ("max_accuracy_drop", "accuracy_drop"))


def tolerance(share: float, verdicts: int) -> float:
    """share + the one-sided binomial 99 % tolerance (normal approximation, z = 2.326)."""
    return share + 2.326 * math.sqrt(share * (1 - share) / verdicts)


@dataclass(frozen=True)
class Rates:
    diffs: int
    fail: dict[str, float]  # evidence verdict FAIL share per gate metric
    held: dict[str, float]  # PASS share
    point_fail: dict[str, float]  # DecGuard's rule: the observed value above the limit


def simulate(cases: int, diffs: int, *, seed: int, drop: float = 0.0, reruns: int = 2,
             unstable: float = noisy_model.UNSTABLE) -> Rates:
    """`diffs` diffs of a baseline and a candidate run of the noisy model (a share
    `unstable` of its cases answers at random between two labels); the candidate breaks a
    share `drop` of the cases (0: the same model)."""
    rng = np.random.default_rng(seed)
    fail = {metric: 0 for _, metric in GATES}
    held = dict(fail)
    point = dict(fail)
    for _ in range(diffs):
        people = noisy_model.population(rng, cases, unstable)
        changed = noisy_model.planted(rng, people, drop) if drop else people
        before = noisy_model.draw(rng, people)[:, 0]
        after_calls = noisy_model.draw(rng, changed, 1 + reruns)
        after = after_calls[:, 0]
        paired = paired_sides(
            noisy_model.case_ids(cases), noisy_model.side(before, people.expected),
            noisy_model.side(after, people.expected),
            reruns=(None, noisy_model.reruns(after_calls[:, 1:])), calibration_bins=10,
        )
        observed = {
            "answer_flip_rate": float((before.argmax(1) != after.argmax(1)).mean()),
            "accuracy_drop": float((before.argmax(1) == people.expected).mean()
                                   - (after.argmax(1) == people.expected).mean()),
        }
        for gate, metric in GATES:
            verdict = gate_evidence(paired, [], gate, metric, "requirement", LIMIT).verdict
            fail[metric] += verdict == "fails"
            held[metric] += verdict == "holds"
            point[metric] += observed[metric] > LIMIT
    return Rates(diffs, {k: v / diffs for k, v in fail.items()},
                 {k: v / diffs for k, v in held.items()},
                 {k: v / diffs for k, v in point.items()})


def test_the_model_is_as_noisy_as_stated() -> None:
    rng = np.random.default_rng(7)
    people = noisy_model.population(rng, 20_000)
    calls = noisy_model.draw(rng, people, 2)
    flips = float((calls[:, 0].argmax(1) != calls[:, 1].argmax(1)).mean())
    assert noisy_model.rerun_flip_rate() == pytest.approx(0.08)
    assert abs(flips - 0.08) < 0.01


def test_no_change_fails_within_alpha_at_200_and_2000_cases() -> None:
    bound = tolerance(ALPHA, NULL_DIFFS)
    for cases, seed in ((200, 1), (2000, 2)):
        rates = simulate(cases, NULL_DIFFS, seed=seed)
        for metric, share in rates.fail.items():
            assert share <= bound, (cases, metric, share)
        # DecGuard's point rule fails a flip limit below the noise on nearly every diff.
        assert rates.point_fail["answer_flip_rate"] > 0.9


def test_a_drop_exactly_at_the_limit_fails_within_alpha() -> None:
    # each broken case is one newly wrong case and one flip no rerun shows: both the
    # accuracy drop and the attributed flip excess sit exactly at their limit
    rates = simulate(1000, NULL_DIFFS, seed=3, drop=LIMIT)
    for metric, share in rates.fail.items():
        assert share <= tolerance(ALPHA, NULL_DIFFS), (metric, share)


def test_a_planted_drop_of_three_times_the_limit_fails_in_most_diffs() -> None:
    rates = simulate(1000, POWER_DIFFS, seed=4, drop=0.06)
    assert rates.fail["accuracy_drop"] >= 0.8


def test_a_planted_flip_excess_over_the_noise_fails_in_most_diffs() -> None:
    rates = simulate(1000, POWER_DIFFS, seed=5, drop=0.08)
    assert rates.fail["answer_flip_rate"] >= 0.8


if __name__ == "__main__":
    scenarios = [
        ("no change, 200 cases", 200, NULL_DIFFS, 1, 0.0),
        ("no change, 2000 cases", 2000, NULL_DIFFS, 2, 0.0),
        ("drop at the limit (0.02), 1000 cases", 1000, NULL_DIFFS, 3, LIMIT),
        ("planted drop 0.06, 1000 cases", 1000, POWER_DIFFS, 4, 0.06),
        ("planted flip excess 0.08, 1000 cases", 1000, POWER_DIFFS, 5, 0.08),
    ]
    for name, cases, diffs, seed, drop in scenarios:
        found = simulate(cases, diffs, seed=seed, drop=drop)
        print(f"{name}: {diffs} diffs; FAIL {found.fail}; PASS {found.held}; "
              f"point rule FAIL {found.point_fail}")
