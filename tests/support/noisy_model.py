"""A seeded noisy decision model for regression simulations: every call draws afresh.

Each case has an answer distribution over three labels. Most cases are stable (one label
every time); an `unstable` share answers its usual label with probability 0.8 and a
neighbour with 0.2, so two calls of the same case disagree with probability
1 − (0.8² + 0.2²) = 0.32 there, and the rerun flip rate over all cases is
0.32 · unstable (0.25 → 8 %). A call returns a probability vector peaked on the drawn label.

A *planted* change makes the candidate answer a different, wrong label on a share of the
stable cases whose usual answer was right: every such case adds one flip that reruns
never show (the attributed flip excess) and one newly wrong case (the accuracy drop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decflow.metrics.regression import Side

LABELS = ("refund", "reject", "review")
UNSTABLE = 0.25
RIGHT = 0.8  # share of cases whose usual answer is the expected label
PEAK = 0.7  # probability put on the drawn label (the rest split evenly)


@dataclass(frozen=True)
class Population:
    usual: np.ndarray  # usual label per case
    other: np.ndarray  # the label an unstable case answers with probability 0.2
    unstable: np.ndarray
    expected: np.ndarray


def population(rng: np.random.Generator, n: int, unstable_share: float = UNSTABLE
               ) -> Population:
    usual = rng.integers(0, 3, n)
    other = (usual + 1 + rng.integers(0, 2, n)) % 3
    unstable = rng.random(n) < unstable_share
    right = rng.random(n) < RIGHT
    wrong = (usual + 1 + rng.integers(0, 2, n)) % 3
    return Population(usual, other, unstable, np.where(right, usual, wrong))


def rerun_flip_rate() -> float:
    return UNSTABLE * (1.0 - (0.8**2 + 0.2**2))


def planted(rng: np.random.Generator, people: Population, share: float) -> Population:
    """A candidate whose model answers a wrong label on `share` of all cases, taken from
    the stable, right ones (each taken case: +1 flip, +1 newly wrong)."""
    eligible = ~people.unstable & (people.usual == people.expected)
    chance = share / float(eligible.mean())
    broken = eligible & (rng.random(len(eligible)) < chance)
    wrong = (people.expected + 1 + rng.integers(0, 2, len(eligible))) % 3
    return Population(np.where(broken, wrong, people.usual), people.other, people.unstable,
                      people.expected)


def draw(rng: np.random.Generator, people: Population, calls: int = 1) -> np.ndarray:
    """`calls` fresh answers per case: n × calls × 3 probability vectors."""
    n = len(people.usual)
    switch = people.unstable[:, None] & (rng.random((n, calls)) < 0.2)
    label = np.where(switch, people.other[:, None], people.usual[:, None])
    out = np.full((n, calls, 3), (1.0 - PEAK) / 2.0)
    np.put_along_axis(out, label[:, :, None], PEAK, axis=2)
    return out


def case_ids(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def side(probabilities: np.ndarray, expected: np.ndarray) -> Side:
    """One run's matched columns (n × 3 draws, every case decided and labeled)."""
    n = len(probabilities)
    return Side(probabilities, np.zeros(n, dtype=bool), expected.astype(np.int64),
                [1.0] * n, [None] * n)


def reruns(probabilities: np.ndarray) -> dict[str, np.ndarray]:
    """Case id → k × 3 reruns (n × k × 3 in)."""
    return {f"c{i}": probabilities[i] for i in range(len(probabilities))}
