"""Exact sizes of the paired accuracy-drop verdict at the margin, over a fine nuisance grid.

The test suite's version (`tests/unit/test_regression_exact_size.py`) checks six (n, Δ) at
eleven nuisance values; this sweeps more n and margins, with the newly-right probability
p₂₁ on 150 evenly spaced values of [0, (1 − Δ)/2] and 75 log-spaced values of [1e-4, 0.05]
(rare discordance), using the test's rejection regions and exact sums. Prints a Markdown
table; the recorded results are in docs/statistics.md.

    PYTHONPATH=src python bench/regression_exact_size.py           # a few CPU minutes
    PYTHONPATH=src python bench/regression_exact_size.py --quick   # n ≤ 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.test_regression_exact_size import regions, sizes

from decflow.metrics.paired import CONTINUITY

SIZES = (5, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 75, 100, 150, 200, 300, 500)
MARGINS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)


def nuisance(margin: float) -> np.ndarray:
    edge = (1 - margin) / 2
    grid = np.concatenate([np.linspace(0.0, edge, 150), np.geomspace(1e-4, 0.05, 75)])
    return np.unique(grid[grid <= edge])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    print(f"continuity correction {CONTINUITY} count\n")
    print("| n | margin | worst wrong FAIL | at p₂₁ | worst wrong PASS | at p₂₁ | CPU s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    overall = 0.0
    for n in (s for s in SIZES if not quick or s <= 100):
        for margin in MARGINS:
            started = time.process_time()
            fail_from, pass_to = regions(n, margin)
            found = [(p, *sizes(n, margin, float(p), fail_from, pass_to))
                     for p in nuisance(margin)]
            fail = max(found, key=lambda row: row[1])
            passed = max(found, key=lambda row: row[2])
            overall = max(overall, fail[1], passed[2])
            print(f"| {n} | {margin} | {fail[1]:.2%} | {fail[0]:.4f} | {passed[2]:.2%} | "
                  f"{passed[0]:.4f} | {time.process_time() - started:.1f} |", flush=True)
    print(f"\nlargest exact size over the sweep: {overall:.2%} (α = 5 % per side)")


if __name__ == "__main__":
    main()
