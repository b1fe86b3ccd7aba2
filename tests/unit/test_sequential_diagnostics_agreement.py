"""With stability, persona, blindness and latency gates, a sequential run's status equals the
full run's in all but ≤ α (+ the binomial 99 % tolerance) of seeded runs, at, just below and
just above each limit; and so does every gate it decided. The gates are the driver's own
(`advance`, `settled`, the composites) over planted per-case values, checked after every
batch; the full run's verdicts come from the full run's own code over the whole suite
(`rate_test`, `mean_test`, `detect_blindness`, `percentiles`). The pipeline runs the same
gate code (tests/integration/test_sequential_diagnostics.py; bench/sequential_diagnostics.py
for 200 seeds of 2,000-case suites).

Run as a script (`python -m tests.unit.test_sequential_diagnostics_agreement`) to print the
figures.
"""

from __future__ import annotations

import math

import numpy as np

from decflow.diagnostics.blindness import detect_blindness
from decflow.gates.checks import Check
from decflow.metrics.case_rates import rate_test
from decflow.metrics.differences import difference_test
from decflow.metrics.numeric import percentiles
from decflow.metrics.sequential import RatioGate
from decflow.metrics.sequential_composite import Exceedance, ModalShare
from decflow.pipeline.contract_run.sequential.calls import batch_bounds
from decflow.pipeline.contract_run.sequential.diagnostics import PersonaAxis, stability_gate
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
EPSILON, FLIP_LIMIT, SKEW, LATENCY = 0.05, 0.05, 0.9, 1000.0
# (flaky share, cross − placebo share, modal share, share slower than the latency limit)
SCENARIOS = {
    "at the limits": (0.05, 0.05, 0.9, 0.05),
    "just below": (0.04, 0.03, 0.88, 0.04),
    "just above": (0.06, 0.07, 0.92, 0.06),
}
STATUS = {"fails": "fail", "holds": "pass", "not_established": "not_established"}


def check(gate: str, comparison: str, threshold: float, status: str,
          value: float | None = None) -> Check:
    return Check(gate, "requirement", gate, comparison, threshold,  # type: ignore[arg-type]
                 value, status, "")  # type: ignore[arg-type]


def planted(flaky: float, excess: float, skew: float, slow: float,
            rng: np.random.Generator, placebo: float = 0.02) -> list[Tracked]:
    """A suite with these realized shares, in a random order: flaky cases flip every rerun
    pair (all or nothing); a case's persona excess is 1 (every cross pair flips) or −1
    (a `placebo` share of cases, every placebo pair flips) or 0; base-persona decisions are
    balanced."""
    n = CASES
    shares = np.zeros(n)
    shares[: round(flaky * n)] = 1.0
    d = np.zeros(n)
    up = round((excess + placebo) * n)
    d[:up] = 1.0
    d[up: up + round(placebo * n)] = -1.0
    labels = np.zeros(n, dtype=np.int64)
    labels[round(skew * n):] = 1
    latency = np.full(n, 200.0)
    latency[: round(slow * n)] = 1500.0
    shares, d, labels, latency = (a[rng.permutation(n)] for a in (shares, d, labels, latency))
    ones = np.ones(n)
    stability = rate_test(shares, 3, EPSILON).verdict()
    fair = difference_test(d, FLIP_LIMIT).verdict()
    blind = detect_blindness([str(x) for x in labels], threshold=SKEW).blind
    p95 = percentiles(latency, [95.0])[0]
    assert p95 is not None
    base = ModalShare(SKEW, 2, n, rng.integers(0, 2, n))
    return [
        Tracked(check("stability.verdict", "<=", EPSILON, STATUS[stability]), ones, ones,
                None, composite=stability_gate(EPSILON, n, shares, ones, 3)),
        Tracked(check("counterfactual.gender.max_flip_rate", "<=", FLIP_LIMIT, STATUS[fair]),
                ones, ones, None, composite=PersonaAxis(
                    RatioGate(FLIP_LIMIT, "<=", n, floor=-1.0, target="model"), d, ones,
                    True, base)),
        Tracked(check("blindness.max_skew", "<", SKEW, "fail" if blind else "pass"), ones,
                ones, None, composite=ModalShare(SKEW, 2, n, labels)),
        Tracked(check("max_latency_p95_ms", "<=", LATENCY, "pass" if p95 <= LATENCY else "fail"),
                ones, ones, None, composite=Exceedance(LATENCY, 95.0, n, latency)),
    ]


def status_of(decisions: list[str | None]) -> str:
    if "fail" in decisions:
        return "fail"
    return "pass" if all(d == "pass" for d in decisions) else "warn"


def sequential_run(tracked: list[Tracked], batch: int) -> tuple[str, dict[str, GateState]]:
    design = Design(CASES, ALPHA, 0.02)
    states: dict[str, GateState] = {}
    for bound in batch_bounds(CASES, batch):
        states = advance(states, tracked, bound, design)
        if settled(states, tracked) is not None:
            break
    return status_of([s.decision for s in states.values()]), states


def full_status(tracked: list[Tracked]) -> str:
    return status_of([t.check.status for t in tracked])


def disagreements(seeds: int = SEEDS) -> dict[str, tuple[int, int, int]]:
    """Per scenario: (runs whose status differs, decided gates that differ, decided gates)."""
    found = {}
    for name, rates in SCENARIOS.items():
        runs = gates = decided = 0
        for seed in range(seeds):
            tracked = planted(*rates, np.random.default_rng(seed))
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
    assert decided and wrong / decided <= bound(ALPHA, decided)


def test_clear_suites_stop_early_and_agree() -> None:
    """Clearly deterministic, fair, not blind and fast: decided in a fraction of the suite;
    clearly stochastic: the run stops at the proof."""
    for seed in range(5):
        passing = planted(0.0, 0.0, 0.5, 0.0, np.random.default_rng(seed), placebo=0.0)
        status, states = sequential_run(passing, BATCH)
        assert status == full_status(passing) == "pass"
        assert max(s.decided_at or CASES for s in states.values()) <= CASES // 2
        failing = planted(0.4, 0.0, 0.5, 0.0, np.random.default_rng(seed))
        status, states = sequential_run(failing, BATCH)
        assert status == "fail" and full_status(failing) == "fail"
        assert states["stability.verdict"].decided_at is not None
        assert states["stability.verdict"].decided_at <= 64


def test_a_persona_axis_is_fair_only_with_placebo_and_not_blind() -> None:
    n = CASES
    quiet, ones = np.zeros(n), np.ones(n)
    gate = RatioGate(FLIP_LIMIT, "<=", n, floor=-1.0, target="model")
    balanced = ModalShare(SKEW, 2, n, np.arange(n) % 2)
    blind = ModalShare(SKEW, 2, n, np.zeros(n, dtype=np.int64))
    assert PersonaAxis(gate, quiet, ones, True, balanced).evidence(
        300, ALPHA, interval=False).decision == "pass"
    assert PersonaAxis(gate, quiet, ones, True, blind).evidence(
        300, ALPHA, interval=False).decision == "not_established"
    raw = RatioGate(FLIP_LIMIT, "<=", n, target="model")
    assert PersonaAxis(raw, quiet, ones, False, balanced).evidence(
        300, ALPHA, interval=False).decision == "not_established"
    unfair = np.where(np.arange(n) % 3 == 0, 1.0, 0.0)
    assert PersonaAxis(gate, unfair, ones, True, blind).evidence(
        60, ALPHA, interval=False).decision == "fail"


if __name__ == "__main__":
    for scenario, (runs, gates, decided) in disagreements().items():
        print(f"{scenario}: status differs in {runs}/{SEEDS} seeds; decided gates differing "
              f"{gates}/{decided}")
