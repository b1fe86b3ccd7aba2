"""`max_smooth_ece` keeps its error rates, and finds a miscalibrated model: seeded suites.

- 400 perfectly calibrated suites (three labels, top confidence uniform in [0.4, 1], correct
  with that probability) at 50, 100, 200 and 500 cases: `max_smooth_ece: 0.05` FAILs at most
  α + the binomial 99 % tolerance (the binned `max_ece: 0.05` fails 98 % / 90 % / 61 % / 12 %
  of them: it compares a noisy estimate with the limit);
- 400 suites of 500 cases from a model whose true SmoothECE is the limit (the overconfident
  family below at k = 1.2363): FAIL ≤ α + tolerance and PASS ≤ α + tolerance;
- an overconfident two-label model (true p uniform in [0.05, 0.95], it answers
  p′ = clip(0.5 + 1.8 (p − 0.5), 0.005, 0.995)) at 500 cases: FAIL in ≥ 80 % of 200 suites;
- every confidence equal (f) and accuracy a with |f − a| = L: the reflected kernel keeps its
  mass, so smECE_σ = |f − a| = L at every σ — the model sits exactly at the limit at every
  n. The verdict depends only on the number correct, Binomial(n, a), so its error rates are
  exact sums: FAIL ≤ α and PASS ≤ α at small and moderate n, over- and underconfident.

Run as a script to print the rates recorded in docs/statistics.md.
"""

from __future__ import annotations

import math

import numpy as np

from decflow.metrics.smooth_ece import (
    grids_of,
    nodes_for,
    noise_quantile,
    smooth_ece_at,
    smooth_ece_evidence,
)

ALPHA = 0.05
LIMIT = 0.05
TOLERANCE = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / 400)
AT_LIMIT = 1.2363  # overconfidence factor whose population SmoothECE at σ = 0.05 is 0.05


def calibrated(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    f = rng.uniform(0.4, 1.0, n)
    return f, rng.random(n) < f


def overconfident(rng: np.random.Generator, n: int, k: float) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence and correctness of a two-label model that stretches p by k."""
    p = rng.uniform(0.05, 0.95, n)
    answered = np.clip(0.5 + k * (p - 0.5), 0.005, 0.995)
    return np.maximum(answered, 1 - answered), rng.random(n) < np.maximum(p, 1 - p)


def verdicts(suites: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    found = [smooth_ece_evidence(grids_of(f, y), LIMIT, f.size).verdict for f, y in suites]
    return {v: found.count(v) / len(found) for v in ("fails", "holds", "not_established")}


def calibrated_rates(n: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return verdicts([calibrated(rng, n) for _ in range(400)])


def test_perfectly_calibrated_suites_rarely_fail() -> None:
    for seed, n in enumerate((50, 100, 200, 500)):
        assert calibrated_rates(n, seed)["fails"] <= TOLERANCE, n


def test_the_boundary_model_sits_at_the_limit() -> None:
    # Population value from a million draws with the labels' expectation in place of labels.
    rng = np.random.default_rng(9)
    p = rng.uniform(0.05, 0.95, 1_000_000)
    answered = np.clip(0.5 + AT_LIMIT * (p - 0.5), 0.005, 0.995)
    value = smooth_ece_at(grids_of(np.maximum(answered, 1 - answered), np.maximum(p, 1 - p)),
                          LIMIT)
    assert value is not None and abs(value - LIMIT) < 1e-3


def test_at_the_boundary_neither_verdict_exceeds_alpha() -> None:
    rng = np.random.default_rng(10)
    rates = verdicts([overconfident(rng, 500, AT_LIMIT) for _ in range(400)])
    assert rates["fails"] <= TOLERANCE and rates["holds"] <= TOLERANCE, rates


def exact_point_mass_rates(n: int, confidence: float, accuracy: float) -> dict[str, float]:
    """P(each verdict) for n cases all at ``confidence``, correct with ``accuracy``."""
    rates = dict.fromkeys(("fails", "holds", "not_established"), 0.0)
    for k in range(n + 1):
        weight = math.comb(n, k) * accuracy**k * (1 - accuracy) ** (n - k)
        if weight < 1e-12:
            continue
        correct = np.arange(n) < k
        verdict = smooth_ece_evidence(grids_of(np.full(n, confidence), correct), LIMIT, n).verdict
        rates[verdict] += weight
    return rates


POINT_MASSES = [(10, 0.999, 0.949), (20, 0.9, 0.95), (50, 0.99, 0.94), (100, 0.999, 0.949),
                (200, 0.94, 0.99), (200, 0.99, 0.94)]


def test_at_the_boundary_with_equal_confidences_neither_verdict_exceeds_alpha() -> None:
    # Before the fix: wrong PASS 59 % (10 cases at 0.999), 19 % (50 at 0.99); wrong FAIL
    # 36 % (20 at 0.9, accuracy 0.95), 13 % (200 at 0.94): the multiplier bootstrap took its
    # variances from the observed residuals, which are small when few answers are wrong.
    for n, confidence, accuracy in POINT_MASSES:
        rates = exact_point_mass_rates(n, confidence, accuracy)
        assert rates["fails"] <= ALPHA and rates["holds"] <= ALPHA, (n, confidence, rates)


def test_an_overconfident_model_fails_at_500_cases() -> None:
    rng = np.random.default_rng(11)
    assert verdicts([overconfident(rng, 500, 1.8) for _ in range(200)])["fails"] >= 0.80


def median_margin(n: int, seed: int) -> float:
    """The median noise margin q of `max_smooth_ece: 0.05` over 400 calibrated suites."""
    rng = np.random.default_rng(seed)
    return float(np.median([noise_quantile(grids_of(f, y)(nodes_for(LIMIT)), LIMIT)
                            for f, y in (calibrated(rng, n) for _ in range(400))]))


if __name__ == "__main__":
    for seed, n in enumerate((50, 100, 200, 500)):
        print(f"calibrated, {n} cases:", calibrated_rates(n, seed),
              f"median margin q {median_margin(n, seed):.4f}")
    rng = np.random.default_rng(10)
    print("boundary, 500 cases:", verdicts([overconfident(rng, 500, AT_LIMIT) for _ in range(400)]))
    for n, confidence, accuracy in POINT_MASSES:
        print(f"all at {confidence}, accuracy {accuracy}, {n} cases:",
              exact_point_mass_rates(n, confidence, accuracy))
    rng = np.random.default_rng(11)
    print("overconfident 1.8, 500 cases:",
          verdicts([overconfident(rng, 500, 1.8) for _ in range(200)]))
