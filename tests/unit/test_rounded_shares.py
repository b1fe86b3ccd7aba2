"""Randomized rounding of per-case shares (`metrics.rounded_shares`, through `rate_test`).

- On all-or-nothing shares it is the exact binomial test on cases: its p-values are the
  binomial tails summed here from log-pmf recursions (not the code's incomplete beta), and
  the cases it needs to show a rate of 0.01–0.04 below a limit of 0.05 (the first n at which
  ⌈rate·n⌉ of n cases hold) are the exact test's (1.0×: 93, 181, 361, 1,348), where
  Bentkus's bound needed 1.04–1.43×.
- Under the null (mean share at the limit) seeded suites of several share shapes — all or
  nothing, fractional i.i.d. shares, fixed unequal shares (the Poisson-binomial case
  Hoeffding's comparison covers) — are shown below (wrong PASS) or above (wrong FAIL) the
  limit in at most α + the one-sided binomial 99 % tolerance.
- Markov's step beside the mean: one rounded case never fails a limit m with n·m in
  (α, −log(1 − α)), where the binomial tail would and a single case of share n·m makes
  that happen with probability n·m > α.
- The uniforms are keyed by (seed, gate, case id), reproducible, and uniform; a run draws
  its seed, keeps it on --resume and re-gating, and has none with the call cache on.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from functools import cache

import numpy as np
import pytest

from decflow.metrics import bentkus
from decflow.metrics.case_rates import rate_test, rate_thresholds
from decflow.metrics.rounded_shares import p_above, p_below, uniforms
from decflow.pipeline.spec import RunSpec

ALPHA = 0.05
LIMIT = 0.05


def log_pmf(n: int, m: float) -> list[float]:
    """log P(B = j), j = 0 … n, B ~ Binomial(n, m), by the ratio of successive terms."""
    out = [n * math.log1p(-m)]
    for j in range(n):
        out.append(out[-1] + math.log((n - j) / (j + 1)) + math.log(m) - math.log1p(-m))
    return out


def lower_tail(k: int, n: int, m: float) -> float:
    return math.fsum(math.exp(v) for v in log_pmf(n, m)[: k + 1])


def upper_tail(k: int, n: int, m: float) -> float:
    return math.fsum(math.exp(v) for v in log_pmf(n, m)[k:])


def all_or_nothing(ones: int, n: int) -> np.ndarray:
    return np.r_[np.ones(ones), np.zeros(n - ones)]


@pytest.mark.parametrize(("ones", "n"), [(0, 30), (1, 59), (3, 120), (9, 157), (70, 2000),
                                         (14, 200), (30, 300)])
def test_all_or_nothing_shares_get_the_exact_binomial_p_values(ones: int, n: int) -> None:
    draws = np.random.default_rng(ones).random(n)  # any uniforms: 0 and 1 round to themselves
    test = rate_test(all_or_nothing(ones, n), 3, LIMIT, uniforms=draws)
    # Where Hoeffding's comparison holds, the exact tails; beside the mean, Markov's bound.
    if ones <= n * LIMIT - 1:
        assert test.p_below == pytest.approx(lower_tail(ones, n, LIMIT), rel=1e-9, abs=1e-300)
    else:
        assert test.p_below == min(1.0, n * (1 - LIMIT) / (n - ones))
    if ones >= n * LIMIT + 1:
        assert test.p_above == pytest.approx(upper_tail(ones, n, LIMIT), rel=1e-9, abs=1e-300)
    else:
        assert test.p_above == (1.0 if ones == 0 else min(1.0, n * LIMIT / ones))


@pytest.mark.parametrize("n", [1, 7, 20, 59, 157, 400, 1500])
def test_every_count_gets_the_exact_tests_verdict(n: int) -> None:
    tails = np.exp(log_pmf(n, LIMIT))
    below, above = np.cumsum(tails), np.cumsum(tails[::-1])[::-1]
    for k in range(n + 1):
        assert (p_below(k, n, LIMIT) < ALPHA) == (below[k] < ALPHA), k
        assert (p_above(k, n, LIMIT) < ALPHA) == (above[k] < ALPHA), k


def first_holding(rate: float, holds: Callable[[int, int], bool]) -> int:
    """The first n at which ⌈rate·n⌉ all-or-nothing cases of n are shown below the limit."""
    n = 1
    while not holds(math.ceil(rate * n), n):
        n += 1
    return n


@cache
def exact_cut(n: int) -> int:
    """The largest count of n that the exact test (summed here) shows below the limit."""
    tails = np.cumsum(np.exp(log_pmf(n, LIMIT)))
    return int(np.flatnonzero(tails < ALPHA)[-1]) if tails[0] < ALPHA else -1


def test_the_cases_needed_on_all_or_nothing_shares_are_the_exact_tests() -> None:
    rates = (0.01, 0.02, 0.03, 0.04)
    exact = [first_holding(r, lambda k, n: k <= exact_cut(n)) for r in rates]
    rounded = [first_holding(r, lambda k, n: p_below(k, n, LIMIT) < ALPHA) for r in rates]
    worst_case = [first_holding(r, lambda k, n: bentkus.p_below(k, n, LIMIT) < ALPHA)
                  for r in rates]
    assert exact == [93, 181, 361, 1348]  # summed here (docs/statistics.md quotes them)
    assert rounded == exact  # 1.0× at every rate
    assert [round(b / a, 2) for a, b in zip(exact, worst_case, strict=True)] == [
        1.04, 1.07, 1.28, 1.43]  # what Bentkus's bound needed


SHAPES = ("all or nothing", "one pair in three (i.i.d.)", "fixed unequal shares")


def null_suites(shape: str, n: int, suites: int, rng: np.random.Generator) -> np.ndarray:
    """`suites` × n shares whose mean (per case, over the model) is the limit."""
    if shape == "all or nothing":
        return (rng.random((suites, n)) < LIMIT).astype(float)
    if shape == "one pair in three (i.i.d.)":
        return rng.binomial(3, LIMIT, (suites, n)) / 3.0
    fixed = np.zeros(n)  # a tenth of the cases at half, the rest at 0: mean exactly LIMIT
    fixed[: n // 10] = LIMIT * n / (n // 10)
    return np.broadcast_to(fixed, (suites, n)).copy()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", [40, 300, 1500])
def test_under_the_null_the_error_rate_is_at_most_alpha(shape: str, n: int) -> None:
    suites = 4000
    rng = np.random.default_rng(n + len(shape))
    shares = null_suites(shape, n, suites, rng)
    assert abs(shares.mean() - LIMIT) < (0.01 if shape != "fixed unequal shares" else 1e-12)
    counts = (rng.random((suites, n)) < shares).sum(axis=1)  # the rounding, per suite
    sums = rate_thresholds(n, 3, LIMIT, rounded=True)
    wrong_pass = float(np.mean(counts < sums.pass_below))
    wrong_fail = float(np.mean(counts > sums.fail_above))
    bound = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / suites)
    assert wrong_pass <= bound and wrong_fail <= bound, (wrong_pass, wrong_fail)
    # The thresholds are rate_test's own verdicts, through the keyed uniforms too.
    one = shares[0]
    draws = uniforms(n, "stability", [f"case-{i}" for i in range(n)])
    count = int((draws < one).sum())
    verdict = rate_test(one, 3, LIMIT, uniforms=draws).verdict()
    assert verdict == ("holds" if count < sums.pass_below else
                       "fails" if count > sums.fail_above else "not_established")


def test_one_rounded_case_never_fails_where_unequal_shares_would_make_it_likely() -> None:
    n, limit = 51, 0.001  # n·m = 0.051: the binomial tail of one case is below α ...
    assert upper_tail(1, n, limit) < ALPHA
    # ... but one case of share 0.051 (mean exactly the limit) rounds to 1 with chance 0.051.
    assert p_above(1, n, limit) >= ALPHA
    assert rate_test(all_or_nothing(1, n), 3, limit,
                     uniforms=np.zeros(n)).verdict() != "fails"
    assert p_above(2, n, limit) < ALPHA  # two cases still fail it, as the exact test says


def test_the_uniforms_are_keyed_reproducible_and_uniform() -> None:
    ids = [f"case-{i}" for i in range(20_000)]
    first = uniforms(7, "stability", ids)
    assert np.array_equal(first, uniforms(7, "stability", ids))
    assert not np.array_equal(first, uniforms(8, "stability", ids))
    assert not np.array_equal(first, uniforms(7, "counterfactual.gender", ids))
    assert uniforms(7, "stability", ids[5:6])[0] == first[5]  # one case, whatever the others
    assert first.min() >= 0.0 and first.max() < 1.0
    # Kolmogorov–Smirnov distance at 20,000 draws: its 99.9 % quantile is 1.95/√n.
    ordered = np.sort(first)
    grid = np.arange(1, ordered.size + 1) / ordered.size
    assert float(np.max(np.abs(grid - ordered))) < 1.95 / math.sqrt(ordered.size)


def test_a_run_draws_its_seed_unless_the_call_cache_serves_its_answers() -> None:
    made = [RunSpec(contract_path="c.yaml", store_url="s", run_id=f"r{i}") for i in range(2)]
    seeds = [spec.rounding_seed for spec in made]
    assert all(isinstance(seed, int) for seed in seeds) and seeds[0] != seeds[1]
    # An identical cached run is served the same answers: it must report the same, so
    # no randomized verdict (Bentkus's bound, like a run recorded before rounding).
    for mode in ("read-write", "read-only", "refresh"):
        assert RunSpec(contract_path="c.yaml", store_url="s", run_id="r",
                       call_cache=mode).rounding_seed is None
    recorded = made[0].to_dict()
    assert RunSpec.from_dict(recorded).rounding_seed == seeds[0]  # --resume, re-gating
    del recorded["rounding_seed"]
    assert RunSpec.from_dict(recorded).rounding_seed is None  # a run stored before


def test_uniforms_are_the_keyed_blake2b_of_gate_and_case() -> None:
    ids = ["c1", "case-0042", "é-ünïcode", "lone \ud800 surrogate", ""]
    expected = [int.from_bytes(hashlib.blake2b(
        f"g.max_violation_rate\x1f{case}".encode("utf-8", "surrogatepass"),
        key=(12345).to_bytes(8, "big"), digest_size=8).digest(), "big") >> 11 for case in ids]
    assert uniforms(12345, "g.max_violation_rate", ids).tolist() == [
        word * 2.0**-53 for word in expected]
