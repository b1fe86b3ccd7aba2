"""Error rates and power of evidence-gated regression diffs, larger than the test suite's.

The same seeded noisy model and diff path as `tests/unit/test_regression_simulation.py`
(rerun flip rate 8 %, `max_answer_flip_rate: 0.02`, `max_accuracy_drop: 0.02`), with more
diffs per scenario, more rerun counts and a power curve. Prints a Markdown table; the
recorded results are in docs/statistics.md.

    PYTHONPATH=src python bench/regression_noise.py            # about 5 CPU minutes
    PYTHONPATH=src python bench/regression_noise.py --quick    # a tenth of the diffs
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.test_regression_simulation import simulate

ALPHA = 0.05


def bound(diffs: int) -> float:
    return ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / diffs)


NOISY = 0.25  # unstable share: rerun flip rate 8 %
SCENARIOS = (
    # name, cases, diffs, seed, planted share, candidate reruns, unstable share
    ("no change", 200, 2000, 11, 0.0, 2, NOISY),
    ("no change", 2000, 2000, 12, 0.0, 2, NOISY),
    ("no change, 5 reruns", 200, 2000, 13, 0.0, 5, NOISY),
    ("no change, 1 rerun", 2000, 1000, 14, 0.0, 1, NOISY),
    ("change at the limit (0.02)", 1000, 2000, 15, 0.02, 2, NOISY),
    ("change at the limit (0.02)", 200, 2000, 16, 0.02, 2, NOISY),
    ("change at the limit (0.02)", 100, 2000, 21, 0.02, 2, NOISY),
    ("change at the limit, no noise", 200, 2000, 22, 0.02, 2, 0.0),
    ("change at the limit, flip rate 19 %", 200, 2000, 23, 0.02, 2, 0.6),
    ("planted 0.04", 1000, 500, 17, 0.04, 2, NOISY),
    ("planted 0.06", 1000, 500, 18, 0.06, 2, NOISY),
    ("planted 0.08", 1000, 500, 19, 0.08, 2, NOISY),
    ("planted 0.06", 200, 500, 20, 0.06, 2, NOISY),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    print("| scenario | cases | reruns | diffs | flip FAIL | flip PASS | flip FAIL, point rule "
          "| accuracy FAIL | accuracy PASS | accuracy FAIL, point rule | CPU s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, cases, diffs, seed, share, reruns, unstable in SCENARIOS:
        diffs = max(diffs // 10, 40) if quick else diffs
        started = time.process_time()
        found = simulate(cases, diffs, seed=seed, drop=share, reruns=reruns,
                         unstable=unstable)
        spent = time.process_time() - started
        flip, accuracy = "answer_flip_rate", "accuracy_drop"
        print(f"| {name} | {cases} | {reruns} | {diffs} | {found.fail[flip]:.2%} | "
              f"{found.held[flip]:.2%} | {found.point_fail[flip]:.2%} | "
              f"{found.fail[accuracy]:.2%} | {found.held[accuracy]:.2%} | "
              f"{found.point_fail[accuracy]:.2%} | {spent:.0f} |")
    print(f"\nbound for a FAIL share under no change or at the limit: α + 2.326·√(α(1−α)/d) = "
          f"{bound(2000):.4f} at 2,000 diffs, {bound(1000):.4f} at 1,000")


if __name__ == "__main__":
    main()
