"""Tests of a rate over shares (several pairs a case) against a limit of 0.05: the cases
at which each shows a rate below the limit with 80 % power, by seeded simulation.

Three ways a case's three rerun pairs can flip, at rates 0.01 / 0.02 / 0.03:
all or nothing (a case flips every pair or none), independently (each pair at the rate),
and flaky cases (10 % of cases … the rate's share of cases flip each pair with probability
0.3). Tests: the exact binomial test on the shares randomly rounded to 0/1 (what decflow
uses for shares since issue 32, session 3), Bentkus's bound on the shares' sum (before), the
betting mixture on the shares (before that), a weighted Bonferroni split of rounding (0.8·α)
and betting (0.2·α) considered and not taken, and the exact binomial test on cases (only
valid when the shares are 0/1, shown for all or nothing). Sizes are scanned in steps of 20
cases, 200 suites each; the figure is the first size with ≥ 80 % (a planning figure).

    python bench/share_tests.py
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from decflow.metrics import bentkus
from decflow.metrics.binomial import lower_tail
from decflow.metrics.bounded_mean import log_capital
from decflow.metrics.rounded_shares import p_below as rounded_p_below

LIMIT, ALPHA, PAIRS, SUITES = 0.05, 0.05, 3, 200
Draw = Callable[[np.random.Generator, int, float], np.ndarray]

DRAWS: dict[str, Draw] = {
    "all or nothing": lambda rng, n, rate: (rng.random(n) < rate).astype(float),
    "independent pairs": lambda rng, n, rate: rng.binomial(PAIRS, rate, n) / PAIRS,
    "flaky cases (0.3 a pair)": lambda rng, n, rate: rng.binomial(
        PAIRS, np.where(rng.random(n) < rate / 0.3, 0.3, 0.0)) / PAIRS,
}
RNG = np.random.default_rng(29)  # the rounding uniforms: independent of the shares


def rounded_p(x: np.ndarray) -> float:
    return rounded_p_below(int(np.count_nonzero(RNG.random(x.size) < x)), x.size, LIMIT)


TESTS: dict[str, Callable[[np.ndarray], bool]] = {
    "randomized rounding": lambda x: rounded_p(x) < ALPHA,
    "rounding 0.8 α + betting 0.2 α": lambda x: rounded_p(x) < 0.8 * ALPHA or log_capital(
        x, LIMIT, above=False) > math.log(1 / (0.2 * ALPHA)),
    "Bentkus": lambda x: bentkus.p_below(float(x.sum()), x.size, LIMIT) < ALPHA,
    "betting": lambda x: log_capital(x, LIMIT, above=False) > math.log(1 / ALPHA),
    "exact binomial (0/1 only)": lambda x: lower_tail(round(float(x.sum())), x.size,
                                                      LIMIT) < ALPHA,
}


def cases_for_power(draw: Draw, test: Callable[[np.ndarray], bool], rate: float,
                    seed: int) -> int | None:
    rng = np.random.default_rng(seed)
    for n in range(20, 6001, 20):
        if np.mean([test(draw(rng, n, rate)) for _ in range(SUITES)]) >= 0.8:
            return n
    return None


def main() -> None:
    print("| shares | test | rate 0.01 | 0.02 | 0.03 | CPU s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for shape, draw in DRAWS.items():
        for name, test in TESTS.items():
            if name.startswith("exact") and shape != "all or nothing":
                continue
            started = time.process_time()
            found = [cases_for_power(draw, test, rate, seed=17) for rate in (0.01, 0.02, 0.03)]
            print(f"| {shape} | {name} | " + " | ".join(str(n) for n in found)
                  + f" | {time.process_time() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
