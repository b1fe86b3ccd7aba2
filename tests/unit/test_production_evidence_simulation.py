"""Evidence-gated production gates keep their error rates where point gates false-alarm.

Seeded simulations of one fixed model (issue 34): top-label confidences 0.5 + 0.5·Beta(2, 1.2)
in 10 bins, each record correct with probability 0.88 independently. The statistics go
through the check's own code (`grouped_stats`, `production_metrics`, `drift`), the verdicts
through `evidence_checks` (and DecGuard's point gates for comparison). α = 0.05; a simulated
FAIL share of R checks may exceed α by the one-sided binomial 99 % tolerance
α + 2.326·√(α(1 − α)/R):

- no drift, 500 and 1,000 rows against a baseline of the same size, gates
  `max_confidence_tv_distance: 0.05` and `max_accuracy_drop: 0.02`: FAIL ≤ α (point gates:
  ~45 % and ~13 % on the TV gate alone, as measured in the issue);
- 20 segments × 50 rows, `segment_requirements.min_accuracy: 0.8`: FAIL ≤ α (point: ~48 %);
- at the boundary (a true TV of exactly 0.05, a true drop of exactly 0.02, a binned ECE of
  exactly 0.05, an ECE increase of exactly 0.03): FAIL ≤ α;
- power: a true TV of 0.10 against 0.05 at 1,000 rows (baseline 10,000) FAILs ≥ 80 %;
  3 of 20 segments dropped from 0.88 to 0.6 at 200 rows each FAIL ≥ 80 %.

Run this module as a script (``python -m tests.unit.test_production_evidence_simulation``)
to print the figures recorded in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from decflow.contracts.gates import Production, production_model
from decflow.gates.checks import Check, status_of
from decflow.gates.production import aggregate_checks, segment_checks
from decflow.gates.production_evidence import evidence_checks
from decflow.metrics.golden_metrics import calibration_bin_index
from decflow.metrics.production import (
    Metrics,
    RecordColumns,
    drift,
    grouped_stats,
    production_metrics,
)

ALPHA = 0.05
BINS = 10
ACCURACY = 0.88
# bin shares of 0.5 + 0.5·Beta(2, 1.2) (10 bins; measured on 2M draws)
SHARES = np.array([0, 0, 0, 0, 0, 0.051, 0.148, 0.229, 0.289, 0.283])
SHARES = SHARES / SHARES.sum()


def tolerance(runs: int) -> float:
    return ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def moved(shares: np.ndarray, moves: dict[int, float]) -> np.ndarray:
    """Shares with mass added (+) or taken (−) per bin; TV = half the moved mass."""
    out = shares.copy()
    for k, delta in moves.items():
        out[k] += delta
    assert np.all(out >= 0) and math.isclose(out.sum(), 1.0)
    return out


# confidences shifted down: TV 0.10 (and the cumulative distance 0.10), and half of it
SHIFT = {9: -0.05, 8: -0.05, 6: 0.06, 5: 0.04}
SHIFTED = moved(SHARES, SHIFT)
AT_LIMIT = moved(SHARES, {k: v / 2 for k, v in SHIFT.items()})
# confidences spread (two crossings): TV 0.10, cumulative distance 0.05
SPREAD = moved(SHARES, {7: -0.05, 8: -0.05, 5: 0.05, 9: 0.05})


def records(rng: np.random.Generator, n: int, shares: np.ndarray,
            accuracy: float | np.ndarray | None, *, gap: float = 0.0) -> RecordColumns:
    """n labelled records: confidences uniform within bins drawn at `shares`, each correct
    with probability `accuracy` (one value, or one per record; None: its confidence less
    `gap`)."""
    bins = rng.choice(BINS, size=n, p=shares)
    confidence = (bins + rng.uniform(0.001, 0.999, size=n)) / BINS
    chance = np.clip(confidence - gap, 0.0, 1.0) if accuracy is None else accuracy
    correct = rng.random(n) < chance
    every, none, rows = np.ones(n, bool), np.zeros(n, bool), np.arange(n)
    return RecordColumns(
        n=n, confidence=confidence, bins=calibration_bin_index(confidence, BINS), known=every,
        correct=correct, labelled=rows, brier_terms=(confidence - correct) ** 2,
        nll_terms=-np.log(np.where(correct, confidence, 1 - confidence)),
        flags={"total": every, "with_outcome": every, "with_correctness": every,
               "with_action": none, "with_fallback": none, "with_latency": none,
               "with_cost": none, "n_correct": correct, "covered": none, "n_abstain": none,
               "n_human_review": none, "n_fallback": none},
        latency_rows=rows[:0], latency=np.zeros(0), cost_rows=rows[:0], cost=np.zeros(0))


def metrics(columns: RecordColumns, segments: int = 0) -> tuple[Metrics, list[tuple[str, Metrics]]]:
    """The window's metrics and, with `segments`, each of that many equal segments'."""
    whole = grouped_stats(columns, [""], np.zeros(columns.n, np.int64), BINS)[""]
    if not segments:
        return production_metrics(whole, BINS, None), []
    keys = [f"s{i}" for i in range(segments)]
    groups = np.arange(columns.n) * segments // columns.n
    parts = grouped_stats(columns, keys, groups, BINS)
    return production_metrics(whole, BINS, None), [
        (f"region={key}", production_metrics(parts[key], BINS, None)) for key in keys]


DRIFT_GATES = production_model().model_validate(
    {"requirements": {"max_confidence_tv_distance": 0.05, "max_accuracy_drop": 0.02}})
TV_GATE = production_model().model_validate({"requirements": {"max_confidence_tv_distance": 0.05}})
DROP_GATE = production_model().model_validate({"requirements": {"max_accuracy_drop": 0.02}})
ECE_GATE = production_model().model_validate({"requirements": {"max_ece": 0.05}})
ECE_INCREASE_GATE = production_model().model_validate({"requirements": {"max_ece_increase": 0.03}})
SEGMENT_GATE = production_model().model_validate(
    {"segments": ["region"], "segment_requirements": {"min_accuracy": 0.8}})

Draw = Callable[[np.random.Generator], tuple[RecordColumns, RecordColumns | None]]


def rates(production: Production, draw: Draw, runs: int, *, seed: int, segments: int = 0
          ) -> dict[str, float]:
    """Shares of evidence FAIL / PASS and of point FAIL over `runs` seeded checks."""
    rng = np.random.default_rng(seed)
    evidence_fail = evidence_pass = point_fail = 0
    for _ in range(runs):
        window, reference = draw(rng)
        now, parts = metrics(window, segments)
        then = None if reference is None else metrics(reference)[0]
        aggregate, per_segment = evidence_checks(production, now, then, parts)
        status = status_of(aggregate + [c for cs in per_segment for c in cs])[0]
        evidence_fail += status == "fail"
        evidence_pass += status == "pass"
        point: list[Check] = aggregate_checks(production, now, drift(now, then))
        for name, part in parts:
            point += segment_checks(production, name, part)
        point_fail += status_of(point)[0] == "fail"
    return {"fail": evidence_fail / runs, "pass": evidence_pass / runs,
            "point_fail": point_fail / runs}


def same_model(n: int, m: int, shares: np.ndarray = SHARES,
               accuracy: float = ACCURACY) -> Draw:
    """A window of n records at `shares`/`accuracy` against a baseline of m unchanged ones."""
    def draw(rng: np.random.Generator) -> tuple[RecordColumns, RecordColumns | None]:
        return (records(rng, n, shares, accuracy),
                records(rng, m, SHARES, ACCURACY) if m else None)
    return draw


def overconfident(n: int, m: int, gap: float) -> Draw:
    """A window of n records right `gap` less often than confident (binned ECE `gap`)
    against a baseline of m calibrated records (no baseline when m = 0)."""
    def draw(rng: np.random.Generator) -> tuple[RecordColumns, RecordColumns | None]:
        return (records(rng, n, SHARES, None, gap=gap),
                records(rng, m, SHARES, None) if m else None)
    return draw


def dropped_segments(rows: int, segments: int, dropped: int, accuracy: float) -> Draw:
    """`segments` segments of `rows` records; the first `dropped` at `accuracy`."""
    per_record = np.repeat([accuracy] * dropped + [ACCURACY] * (segments - dropped), rows)

    def draw(rng: np.random.Generator) -> tuple[RecordColumns, RecordColumns | None]:
        return records(rng, rows * segments, SHARES, per_record), None
    return draw


RUNS = 300
POWER_RUNS = 150


def test_no_drift_drift_gates_keep_alpha_at_500_and_1000_rows() -> None:
    for n, seed in ((500, 1), (1000, 2)):
        found = rates(DRIFT_GATES, same_model(n, n), RUNS, seed=seed)
        assert found["fail"] <= tolerance(RUNS), (n, found)
        assert found["point_fail"] > 0.1, (n, found)  # the point gates' false alarms


def test_no_drift_twenty_segments_of_fifty_keep_alpha() -> None:
    found = rates(SEGMENT_GATE, dropped_segments(50, 20, 0, ACCURACY), RUNS, seed=3,
                  segments=20)
    assert found["fail"] <= tolerance(RUNS), found
    assert found["point_fail"] > 0.3, found


def test_at_the_limit_a_false_fail_stays_within_alpha() -> None:
    tv = rates(TV_GATE, same_model(1000, 10_000, AT_LIMIT), RUNS, seed=4)
    drop = rates(DROP_GATE, same_model(1000, 1000, accuracy=ACCURACY - 0.02), RUNS, seed=5)
    assert tv["fail"] <= tolerance(RUNS), tv
    assert drop["fail"] <= tolerance(RUNS), drop
    assert tv["pass"] <= tolerance(RUNS) and drop["pass"] <= tolerance(RUNS), (tv, drop)


def test_calibration_gates_at_their_limit_keep_alpha() -> None:
    ece = rates(ECE_GATE, overconfident(300, 0, 0.05), RUNS, seed=8)
    increase = rates(ECE_INCREASE_GATE, overconfident(500, 2000, 0.03), RUNS // 2, seed=9)
    assert ece["fail"] <= tolerance(RUNS) and ece["pass"] <= tolerance(RUNS), ece
    assert increase["fail"] <= tolerance(RUNS // 2), increase


def test_a_true_tv_of_ten_points_fails_at_1000_rows() -> None:
    found = rates(TV_GATE, same_model(1000, 10_000, SHIFTED), POWER_RUNS, seed=6)
    assert found["fail"] >= 0.8, found


def test_three_of_twenty_segments_dropped_to_sixty_percent_fail() -> None:
    found = rates(SEGMENT_GATE, dropped_segments(200, 20, 3, 0.6), POWER_RUNS, seed=7,
                  segments=20)
    assert found["fail"] >= 0.8, found


def main() -> None:
    """Print the figures recorded in docs/statistics.md (larger runs than the tests)."""
    runs = 2000
    table = [
        ("no drift, 500 rows, baseline 500; TV 0.05 + drop 0.02", DRIFT_GATES,
         same_model(500, 500), 0),
        ("no drift, 1,000 rows, baseline 1,000; TV 0.05 + drop 0.02", DRIFT_GATES,
         same_model(1000, 1000), 0),
        ("no drift, 1,000 rows, baseline 10,000; TV 0.05 + drop 0.02", DRIFT_GATES,
         same_model(1000, 10_000), 0),
        ("no drift, 20 segments × 50 rows; segment min_accuracy 0.8", SEGMENT_GATE,
         dropped_segments(50, 20, 0, ACCURACY), 20),
        ("no drift, 50 segments × 50 rows; segment min_accuracy 0.8", SEGMENT_GATE,
         dropped_segments(50, 50, 0, ACCURACY), 50),
        ("true TV exactly 0.05 (shift down), 1,000 rows, baseline 10,000", TV_GATE,
         same_model(1000, 10_000, AT_LIMIT), 0),
        ("true drop exactly 0.02, 1,000 rows, baseline 1,000", DROP_GATE,
         same_model(1000, 1000, accuracy=ACCURACY - 0.02), 0),
        ("true TV 0.10 (shift down), 1,000 rows, baseline 10,000", TV_GATE,
         same_model(1000, 10_000, SHIFTED), 0),
        ("true TV 0.10 (shift down), 1,000 rows, baseline 1,000", TV_GATE,
         same_model(1000, 1000, SHIFTED), 0),
        ("true TV 0.10 (spread: cumulative 0.05), 1,000 rows, baseline 10,000", TV_GATE,
         same_model(1000, 10_000, SPREAD), 0),
        ("true drop 0.08, 1,000 rows, baseline 10,000", DROP_GATE,
         same_model(1000, 10_000, accuracy=ACCURACY - 0.08), 0),
        ("3 of 20 segments at 0.6, 200 rows each", SEGMENT_GATE,
         dropped_segments(200, 20, 3, 0.6), 20),
        ("no drift, calibrated, 1,000 rows; max_ece 0.05", ECE_GATE,
         overconfident(1000, 0, 0.0), 0),
        ("binned ECE exactly 0.05, 300 rows; max_ece 0.05", ECE_GATE,
         overconfident(300, 0, 0.05), 0),
        ("binned ECE exactly 0.05, 1,000 rows; max_ece 0.05", ECE_GATE,
         overconfident(1000, 0, 0.05), 0),
        ("binned ECE 0.10, 1,000 rows; max_ece 0.05", ECE_GATE,
         overconfident(1000, 0, 0.10), 0),
        ("no drift, calibrated, 1,000 rows, baseline 4,000; max_ece_increase 0.03",
         ECE_INCREASE_GATE, overconfident(1000, 4000, 0.0), 0),
        ("ECE increase exactly 0.03, 1,000 rows, baseline 4,000; max_ece_increase 0.03",
         ECE_INCREASE_GATE, overconfident(1000, 4000, 0.03), 0),
        ("ECE increase 0.08, 1,000 rows, baseline 4,000; max_ece_increase 0.03",
         ECE_INCREASE_GATE, overconfident(1000, 4000, 0.08), 0),
    ]
    for seed, (name, gates, draw, segments) in enumerate(table):
        count = runs if "exactly" in name or "no drift" in name else runs // 4
        if "ECE" in name or "calibrated" in name:
            count //= 2
        found = rates(gates, draw, count, seed=100 + seed, segments=segments)
        print(f"| {name} | {count} | {found['fail']:.2%} | {found['pass']:.2%} "
              f"| {found['point_fail']:.2%} |")


if __name__ == "__main__":
    main()
