"""The persona verdicts keep their stated error rates: measured by simulation, seeded.

Three scenarios of the issue that introduced the case-level excess (α = 0.05, limit 0.05):

- no group effect: a decider whose answer is a pseudo-random function of the whole input
  text (a cross swap and a placebo swap are exchangeable), on the real pair builder with
  100 catalogue seeds × 4 axes = 400 axis verdicts: the share called UNFAIR, and the share
  with a stated direction, stay within α plus the binomial 99 % tolerance;
- a true excess exactly at the limit, spread over pairs and concentrated all-or-nothing in
  a few cases: neither UNFAIR nor FAIR beyond that bound (400 verdicts each);
- a planted excess of 0.25 (20 cases × 8 pairs on one axis, the other three without
  effect): UNFAIR in ≥ 80 % of 100 runs.

The tables mirror what the pipeline hands the analysis: the pair builder's frame with
``prob_a``/``prob_b`` attached, or the same columns built directly. Run this module as a
script (``python -m tests.unit.test_counterfactual_simulation``) to print the measured rates
recorded in docs/statistics.md.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator

import numpy as np
import polars as pl

from decflow.diagnostics.counterfactual import (
    FAIR,
    UNFAIR,
    CounterfactualResult,
    analyse_counterfactual,
    attach_probabilities,
)
from decflow.diagnostics.personas import build_pairs

ALPHA = 0.05
LIMIT = 0.05
LABELS = ["approve", "review", "deny"]
AXES = ["gender", "ethnicity", "religion", "role"]
APPROVE = [0.8, 0.15, 0.05]
DENY = [0.1, 0.2, 0.7]
RUNS = 100  # × 4 axes = 400 axis verdicts per null scenario


def tolerance(share: float, verdicts: int) -> float:
    """share + the one-sided binomial 99 % tolerance (normal approximation, z = 2.326)."""
    return share + 2.326 * math.sqrt(share * (1 - share) / verdicts)


def pseudo_random(value: object) -> list[float]:
    """A decision that depends on every character of the input and on nothing else."""
    digest = hashlib.sha256(str(value).encode()).digest()
    weights = [digest[0] + 1.0, digest[1] + 1.0, digest[2] + 1.0]
    total = sum(weights)
    return [w / total for w in weights]


def no_effect_runs(runs: int = RUNS) -> Iterator[CounterfactualResult]:
    for seed in range(runs):
        cases = [
            (f"c{i}", f"Requests {1000 + 37 * i + seed} EUR for a car; application {i}.")
            for i in range(20)
        ]
        built = build_pairs(cases, catalog_seed=seed)
        answers = {key: pseudo_random(value) for key, value in built.unique_arms().items()}
        yield analyse_counterfactual(
            attach_probabilities(built.frame(), answers),
            LABELS,
            axes=AXES,
            max_flip_rate=LIMIT,
            favourable_labels=["approve"],
        )


def synthetic_table(
    rng: np.random.Generator,
    *,
    cases: int,
    pairs: int,
    placebo_rate: float,
    excess: dict[str, float],
    concentrated: bool = False,
) -> pl.DataFrame:
    """Cross pairs flip at placebo_rate + excess[axis], placebo partners at placebo_rate.

    ``concentrated``: the excess sits in whole cases instead: a case is biased with
    probability q = excess / (1 − placebo_rate), and every cross pair of a biased case
    flips, so the expected excess is the same but all of it is clustered.
    """
    columns: dict[str, list[object]] = {
        name: [] for name in ("axis", "pair_id", "case_id", "kind", "group_a", "group_b",
                              "status", "prob_a", "prob_b")
    }

    def add(axis: str, pair_id: str, case: str, kind: str, flip: bool, swap: bool) -> None:
        a, b = ("x", "y") if kind == "cross" else ("x", "x")
        if swap:
            a, b = b, a
        for key, value in (("axis", axis), ("pair_id", pair_id), ("case_id", case),
                           ("kind", kind), ("group_a", a), ("group_b", b), ("status", "ok")):
            columns[key].append(value)
        columns["prob_a"].append(APPROVE)
        columns["prob_b"].append(DENY if flip else APPROVE)

    for axis in AXES:
        extra = excess.get(axis, 0.0)
        for i in range(cases):
            case = f"c{i}"
            biased = concentrated and rng.random() < extra / (1 - placebo_rate)
            cross_rate = placebo_rate if concentrated else placebo_rate + extra
            for k in range(pairs):
                pair_id = f"{axis}/{case}/{k}"
                flip = biased or rng.random() < cross_rate
                add(axis, pair_id, case, "cross", flip, bool(rng.integers(2)))
                add(axis, pair_id, case, "placebo", rng.random() < placebo_rate, False)
    return pl.DataFrame(
        columns,
        schema={"axis": pl.String, "pair_id": pl.String, "case_id": pl.String,
                "kind": pl.String, "group_a": pl.String, "group_b": pl.String,
                "status": pl.String, "prob_a": pl.List(pl.Float64),
                "prob_b": pl.List(pl.Float64)},
    )


def synthetic_runs(
    seed: int, runs: int = RUNS, **scenario: object
) -> Iterator[CounterfactualResult]:
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        table = synthetic_table(rng, **scenario)  # type: ignore[arg-type]
        yield analyse_counterfactual(table, LABELS, axes=AXES, max_flip_rate=LIMIT)


def shares(results: Iterator[CounterfactualResult], axes: list[str]) -> dict[str, float]:
    verdicts = [r.axes[a] for r in results for a in axes]
    return {
        "verdicts": len(verdicts),
        "unfair": sum(v.verdict == UNFAIR for v in verdicts) / len(verdicts),
        "fair": sum(v.verdict == FAIR for v in verdicts) / len(verdicts),
        "direction": sum(v.direction is not None and v.direction.significant
                         for v in verdicts) / len(verdicts),
    }


AT_LIMIT = {"cases": 20, "pairs": 8, "placebo_rate": 0.2, "excess": dict.fromkeys(AXES, LIMIT)}
PLANTED = {"cases": 20, "pairs": 8, "placebo_rate": 0.2, "excess": {"religion": 0.25}}


def measure() -> dict[str, dict[str, float]]:
    return {
        "no group effect (pseudo-random decider, pair builder)": shares(no_effect_runs(), AXES),
        "excess at the limit, spread": shares(synthetic_runs(11, **AT_LIMIT), AXES),
        "excess at the limit, concentrated in cases": shares(
            synthetic_runs(12, concentrated=True, **AT_LIMIT), AXES
        ),
        "planted excess 0.25 (religion)": shares(synthetic_runs(13, **PLANTED), ["religion"]),
    }


def test_no_group_effect_is_called_unfair_at_most_alpha() -> None:
    got = shares(no_effect_runs(), AXES)
    assert got["verdicts"] >= 400
    assert got["unfair"] <= tolerance(ALPHA, 400)
    assert got["direction"] <= tolerance(ALPHA, 400)  # a stated direction is a claim too


def test_excess_exactly_at_the_limit_is_neither_unfair_nor_fair_beyond_alpha() -> None:
    for concentrated, seed in ((False, 11), (True, 12)):
        got = shares(synthetic_runs(seed, concentrated=concentrated, **AT_LIMIT), AXES)
        assert got["verdicts"] >= 400
        assert got["unfair"] <= tolerance(ALPHA, 400), (concentrated, got)
        assert got["fair"] <= tolerance(ALPHA, 400), (concentrated, got)


def test_planted_excess_of_a_quarter_is_found_in_most_runs() -> None:
    results = list(synthetic_runs(13, **PLANTED))
    found = sum(r.axes["religion"].verdict == UNFAIR for r in results) / len(results)
    assert found >= 0.80
    # The three axes without an effect are rarely blamed alongside it.
    assert shares(iter(results), ["gender", "ethnicity", "role"])["unfair"] <= tolerance(
        ALPHA, 300
    )


if __name__ == "__main__":
    for name, got in measure().items():
        print(f"{name}: {got}")
