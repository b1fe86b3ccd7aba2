"""`max_ece_increase` in evidence-gated diffs (`decflow.metrics.ece_change`): error rates and
power over seeded paired diffs, more and larger than the unit test's.

Confidences uniform in [0.5, 1]; the baseline right with probability confidence − `before`,
the candidate with probability confidence − `after` on the same cases (one uniform draw
decides both answers); ten bins, limit 0.05. The increase of the binned ECE targets is
after − before when both shifts are ≥ 0.

    python bench/ece_change.py --diffs 400
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from decflow.metrics.ece_change import ece_change_test

LIMIT = 0.05

SCENARIOS = {
    "true increase 0.06 (1.2x the limit): PASS is wrong": (0.0, 0.06),
    "at the limit (increase 0.05): both are wrong": (0.0, 0.05),
    "calibrated pair (increase 0): FAIL is wrong": (0.0, 0.0),
    "increase 0.2": (0.0, 0.2),
    "baseline 0.1 overconfident, candidate calibrated (increase -0.1)": (0.1, 0.0),
}


def rates(cases: int, before: float, after: float, diffs: int, seed: int) -> tuple[float,
                                                                                   float]:
    rng = np.random.default_rng(seed)
    failed = passed = 0
    for _ in range(diffs):
        confidence = rng.uniform(0.5, 1.0, cases)
        draw = rng.random(cases)
        test = ece_change_test(confidence, draw < confidence - before, confidence,
                               draw < confidence - after, 10, LIMIT)
        assert test.low is not None and test.high is not None
        failed += test.low > LIMIT
        passed += test.high < LIMIT
    return failed / diffs, passed / diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diffs", type=int, default=400)
    args = parser.parse_args()
    print(f"| scenario | cases | FAIL | PASS | CPU s |  ({args.diffs} diffs each)")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (before, after) in SCENARIOS.items():
        for cases in (200, 1000, 5000):
            started = time.process_time()
            failed, passed = rates(cases, before, after, args.diffs, seed=cases)
            print(f"| {name} | {cases} | {100 * failed:.2f} % | {100 * passed:.2f} % | "
                  f"{time.process_time() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
