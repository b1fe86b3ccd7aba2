"""Persona verdicts under no group effect, on the real pair builder (issue 23).

A decider whose answer is a pseudo-random function of the whole input text: a cross swap and
a placebo swap change the text alike, so there is no group effect. 100 catalogue seeds × 4
axes = 400 axis verdicts, 20 cases × 4 pairs each, limit 0.05. Prints the shares called
UNFAIR, FAIR and with a stated direction (the bound for 400 verdicts is 0.0754). Too slow for
the test suite (the pair builder takes about a second per run); the fast simulations are in
tests/unit/test_counterfactual_simulation.py.

    PYTHONPATH=src .venv/bin/python bench/persona_null.py [--runs 100]
"""

from __future__ import annotations

import argparse
import hashlib
import time

from decflow.diagnostics.counterfactual import (
    FAIR,
    UNFAIR,
    analyse_counterfactual,
    attach_probabilities,
)
from decflow.diagnostics.personas import build_pairs

LABELS = ["approve", "review", "deny"]
AXES = ["gender", "ethnicity", "religion", "role"]


def pseudo_random(value: object) -> list[float]:
    """A decision that depends on every character of the input and on nothing else."""
    digest = hashlib.sha256(str(value).encode()).digest()
    weights = [digest[0] + 1.0, digest[1] + 1.0, digest[2] + 1.0]
    total = sum(weights)
    return [w / total for w in weights]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    runs = parser.parse_args().runs
    started = time.perf_counter()
    verdicts = []
    for seed in range(runs):
        cases = [
            (f"c{i}", f"Requests {1000 + 37 * i + seed} EUR for a car; application {i}.")
            for i in range(20)
        ]
        built = build_pairs(cases, catalog_seed=seed)
        answers = {key: pseudo_random(value) for key, value in built.unique_arms().items()}
        result = analyse_counterfactual(
            attach_probabilities(built.frame(), answers), LABELS, axes=AXES,
            max_flip_rate=0.05, favourable_labels=["approve"],
        )
        verdicts += [result.axes[a] for a in AXES]
    n = len(verdicts)
    print(f"{n} axis verdicts in {time.perf_counter() - started:.0f} s")
    print(f"UNFAIR {sum(v.verdict == UNFAIR for v in verdicts) / n:.4f}")
    print(f"FAIR {sum(v.verdict == FAIR for v in verdicts) / n:.4f}")
    stated = sum(v.direction is not None and v.direction.significant for v in verdicts)
    print(f"direction stated {stated / n:.4f}")


if __name__ == "__main__":
    main()
