"""`max_smooth_ece: 0.05` at the limit where its noise bound is nearly tight, and the Monte
Carlo error of its 200-replicate margin.

The bound takes every case's 0/1 variance as ¼, so it is loosest where accuracies are near
0 or 1 (the test suite's cases) and nearly tight near 0.5. This prints, at the limit:

- every confidence f with accuracy a, |f − a| = 0.05, near 0.5: exact rates (binomial sums,
  `exact_point_mass_rates` of tests/unit/test_calibration_simulation.py);
- two groups of equal confidences, the first calibrated, the second's accuracy set so that
  the suite's SmoothECE at σ = 0.05 (labels replaced by their expectations) is exactly 0.05:
  exact rates (a double binomial sum) at small n, seeded simulation at large n;
- seed 0's margin q against a 20,000-replicate value on the same suites.

The recorded results are in docs/statistics.md.

    PYTHONPATH=src python bench/calibration_exact.py      # a few CPU minutes
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.test_calibration_simulation import LIMIT, exact_point_mass_rates

from decflow.metrics.smooth_ece import (
    grids_of,
    nodes_for,
    noise_quantile,
    smooth_ece_at,
    smooth_ece_evidence,
)

POINT_MASSES = ((0.55, 0.5), (0.45, 0.5), (0.5, 0.55), (0.75, 0.7))
# calibrated cases, their confidence, miscalibrated cases, their confidence
EXACT_MIXTURES = ((90, 0.5, 10, 0.95), (180, 0.5, 20, 0.95), (270, 0.5, 30, 0.95),
                  (50, 0.5, 50, 0.9))
SIMULATED_MIXTURES = ((950, 0.5, 50, 0.999, 4000), (900, 0.5, 100, 0.95, 4000),
                      (4750, 0.5, 250, 0.999, 2000))


def binomial(n: int, a: float) -> list[float]:
    return [math.comb(n, k) * a**k * (1 - a) ** (n - k) for k in range(n + 1)]


def at_limit(calibrated: int, f1: float, other: int, f2: float) -> tuple[np.ndarray, np.ndarray]:
    """Confidences and per-case accuracies: the second group's accuracy (below f2) by
    bisection so that SmoothECE at σ = LIMIT of the expected correctness is LIMIT."""
    f = np.concatenate([np.full(calibrated, f1), np.full(other, f2)])
    low, high = 0.0, f2
    for _ in range(60):
        middle = (low + high) / 2
        p = np.concatenate([np.full(calibrated, f1), np.full(other, middle)])
        value = smooth_ece_at(grids_of(f, p), LIMIT)
        low, high = (middle, high) if value is not None and value > LIMIT else (low, middle)
    return f, np.concatenate([np.full(calibrated, f1), np.full(other, (low + high) / 2)])


def exact_mixture(calibrated: int, other: int, f: np.ndarray, p: np.ndarray) -> dict[str, float]:
    rates = dict.fromkeys(("fails", "holds", "not_established"), 0.0)
    for k1, w1 in enumerate(binomial(calibrated, float(p[0]))):
        for k2, w2 in enumerate(binomial(other, float(p[-1]))):
            if w1 * w2 < 1e-12:
                continue
            y = np.concatenate([np.arange(calibrated) < k1, np.arange(other) < k2])
            rates[smooth_ece_evidence(grids_of(f, y), LIMIT, f.size).verdict] += w1 * w2
    return rates


def margins(f: np.ndarray) -> str:
    grid = grids_of(f, np.zeros(f.size))(nodes_for(LIMIT))
    seeded = noise_quantile(grid, LIMIT)
    reference = noise_quantile(grid, LIMIT, seed=1, replicates=20_000)
    return f"q {seeded:.4f} (20,000 replicates: {reference:.4f}, {seeded / reference - 1:+.1%})"


def shown(rates: dict[str, float]) -> str:
    return f"FAIL {rates['fails']:.2%}, PASS {rates['holds']:.2%}"


def main() -> None:
    for confidence, accuracy in POINT_MASSES:
        for n in (10, 20, 50, 100, 200, 500):
            rates = exact_point_mass_rates(n, confidence, accuracy)
            print(f"all at {confidence}, accuracy {accuracy}, {n} cases (exact): {shown(rates)}; "
                  f"{margins(np.full(n, confidence))}", flush=True)
    for calibrated, f1, other, f2 in EXACT_MIXTURES:
        f, p = at_limit(calibrated, f1, other, f2)
        print(f"{calibrated} at {f1} calibrated + {other} at {f2} with accuracy {p[-1]:.3f} "
              f"(exact): {shown(exact_mixture(calibrated, other, f, p))}; {margins(f)}",
              flush=True)
    rng = np.random.default_rng(5)
    for calibrated, f1, other, f2, suites in SIMULATED_MIXTURES:
        f, p = at_limit(calibrated, f1, other, f2)
        found = [smooth_ece_evidence(grids_of(f, rng.random(f.size) < p), LIMIT, f.size).verdict
                 for _ in range(suites)]
        rates = {v: found.count(v) / suites for v in ("fails", "holds")}
        print(f"{calibrated} at {f1} calibrated + {other} at {f2} with accuracy {p[-1]:.3f} "
              f"({suites} seeded suites): {shown(rates)}; {margins(f)}", flush=True)


if __name__ == "__main__":
    main()
