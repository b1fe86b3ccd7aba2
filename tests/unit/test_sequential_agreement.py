"""A sequential run's status equals the full suite's in all but ≤ α (+ the binomial 99 %
tolerance) of seeded runs, with rates planted at, just below and just above each limit;
and so does every gate it decided. The gates are the driver's own (`advance`, `settled`
over the per-case values of a planted suite), checked after every batch; the pipeline runs
the same code (tests/integration/test_sequential_runs.py, bench/sequential_agreement.py
for 200 seeds of 2,000-case suites through the mock backend).

Run as a script (`python -m tests.unit.test_sequential_agreement`) to print the figures.
"""

from __future__ import annotations

import math

import numpy as np

from decflow.gates.checks import Check
from decflow.metrics.sequential import RatioGate
from decflow.pipeline.contract_run.sequential.calls import batch_bounds
from decflow.pipeline.contract_run.sequential.gates import (
    Design,
    GateState,
    Tracked,
    advance,
    settled,
)

ALPHA = 0.05
CASES = 500
BATCH = 16
SEEDS = 60
VARIANTS = 4  # transformed requests per case of the property
ACCURACY, FLIPS = 0.85, 0.05
# (accuracy, flip rate) of the suite: at, just below and just above the limits.
SCENARIOS = {
    "at the limits": (ACCURACY, FLIPS),
    "just below": (ACCURACY - 0.02, FLIPS - 0.01),
    "just above": (ACCURACY + 0.02, FLIPS + 0.01),
}


def check(gate: str, comparison: str, threshold: float, value: float) -> Check:
    holds = value >= threshold if comparison == ">=" else value <= threshold
    return Check(gate, "requirement", gate, comparison, threshold,  # type: ignore[arg-type]
                 value, "pass" if holds else "fail", "")


def planted(accuracy: float, flips: float, rng: np.random.Generator) -> list[Tracked]:
    """A suite with exactly these rates, in a random order; flips come all-or-nothing per
    case for half of the flipping variants (clustered) and spread for the rest."""
    n = CASES
    right = np.zeros(n)
    right[: round(accuracy * n)] = 1.0
    flipped = np.zeros(n)
    total = round(flips * n * VARIANTS)
    clustered = total // 2 // VARIANTS
    flipped[:clustered] = VARIANTS
    spread = total - clustered * VARIANTS
    flipped[clustered:clustered + spread] += 1.0
    order = rng.permutation(n)
    right, flipped = right[order], flipped[rng.permutation(n)]
    ones, variants = np.ones(n), np.full(n, float(VARIANTS))
    design = Design(n, ALPHA, 0.02)
    return [
        Tracked(check("min_accuracy", ">=", ACCURACY, right.mean()), right, ones,
                RatioGate(ACCURACY, ">=", n)),
        Tracked(check("option_order.max_flip_rate", "<=", FLIPS, flipped.sum() / variants.sum()),
                flipped, variants, RatioGate(FLIPS, "<=", n, den_max=VARIANTS)),
        Tracked(check("max_error_rate", "<=", 0.0, 0.0), np.zeros(n), ones,
                RatioGate(design.zero_limit, "<", n, binary=True), zero=True),
    ]


def sequential_run(tracked: list[Tracked], batch: int) -> tuple[str, dict[str, GateState]]:
    design = Design(CASES, ALPHA, 0.02)
    states: dict[str, GateState] = {}
    for bound in batch_bounds(CASES, batch):
        states = advance(states, tracked, bound, design)
        if settled(states, tracked) is not None:
            break
    decisions = [s.decision for s in states.values()]
    return ("fail" if "fail" in decisions else
            "pass" if all(d == "pass" for d in decisions) else "warn"), states


def full_status(tracked: list[Tracked]) -> str:
    return "fail" if any(t.check.status == "fail" for t in tracked) else "pass"


def disagreements(seeds: int = SEEDS) -> dict[str, tuple[int, int, int]]:
    """Per scenario: (runs whose status differs, decided gates that differ, decided gates)."""
    found = {}
    for name, (accuracy, flips) in SCENARIOS.items():
        runs = gates = decided = 0
        for seed in range(seeds):
            tracked = planted(accuracy, flips, np.random.default_rng(seed))
            status, states = sequential_run(tracked, BATCH)
            runs += status != full_status(tracked)
            for item in tracked:
                state = states[item.check.gate]
                if state.decision is not None:
                    decided += 1
                    gates += state.decision != item.check.status
        found[name] = (runs, gates, decided)
    return found


def bound(share: float, n: int) -> float:
    return share + 2.326 * math.sqrt(share * (1 - share) / n)


def test_status_agrees_with_the_full_run() -> None:
    found = disagreements()
    runs = sum(r for r, _, _ in found.values())
    total = SEEDS * len(SCENARIOS)
    assert runs / total <= bound(ALPHA, total)
    wrong = sum(g for _, g, _ in found.values())
    decided = sum(d for _, _, d in found.values())
    assert wrong / decided <= bound(ALPHA, decided)


def test_batch_sizes_agree() -> None:
    agree, seeds = 0, 20
    for seed in range(seeds):
        tracked = planted(ACCURACY + 0.05, FLIPS - 0.03, np.random.default_rng(seed))
        statuses = {sequential_run(tracked, batch)[0] for batch in (1, 8, 64)}
        agree += len(statuses) == 1
    assert agree / seeds >= 1 - 2 * ALPHA


if __name__ == "__main__":
    for scenario, (runs, gates, decided) in disagreements().items():
        print(f"{scenario}: status differs in {runs}/{SEEDS} seeds; decided gates differing "
              f"{gates}/{decided}")


def test_a_property_that_transformed_nothing_waits_for_the_suite() -> None:
    from types import SimpleNamespace

    import polars as pl

    from decflow.pipeline.contract_run.sequential.gates import property_tracked

    check = Check("case_swap.max_error_rate", "requirement", "case_swap.error_rate", "<=",
                  0.0, None, "fail", "case_swap.error_rate could not be computed")
    empty = pl.DataFrame(schema={"request_id": pl.String, "case_id": pl.String,
                                 "property": pl.String, "error_kind": pl.String})
    contract = SimpleNamespace(properties=SimpleNamespace(enabled=list))
    (tracked,) = property_tracked(contract, [check], ["c1", "c2"], empty, empty,
                                  Design(2, ALPHA, 0.02))
    assert tracked.ratio is None
    states = advance({}, [tracked], 1, Design(2, ALPHA, 0.02))
    assert states[check.gate].decision is None
    assert advance(states, [tracked], 2, Design(2, ALPHA, 0.02))[check.gate].decision == "fail"
