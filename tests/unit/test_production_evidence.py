"""The pieces of the evidence-gated production gates: the gating rule, the tests' bounds and
p-values agreeing with each other, exact error rates where the verdict depends on counts
alone, limit-0 counts, Holm across a level's family, and what cannot be computed."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from decflow.contracts import parse_contract
from decflow.contracts.gates import production_model
from decflow.gates.production_evidence import evidence_checks, production_gating
from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.metrics.noise_floor import (
    LARGER_BASELINE,
    Bins,
    ece_noise_tail,
    ece_test,
    tv_noise_tails,
    tv_test,
)
from decflow.metrics.rate_bounds import drop_test, rate_test, sum_mean_test
from tests.support.paths import REFERENCE

EXAMPLE = REFERENCE / "decguard-examples" / "refund" / "decguard.yaml"


def _contract(**sections: object):  # type: ignore[no-untyped-def]
    document = yaml.safe_load(EXAMPLE.read_text())
    for key, value in sections.items():
        if key == "gating":
            document["production"]["gating"] = value
        else:
            document[key] = value
    return parse_contract(document, "refund.yaml")


def test_plain_contracts_keep_point_gates_decflow_ones_get_evidence() -> None:
    assert production_gating(_contract())[0] == "point"
    gating, why = production_gating(_contract(monitor={}))
    assert gating == "evidence" and "monitor" in why
    assert production_gating(_contract(gating="evidence"))[0] == "evidence"
    assert production_gating(_contract(gating="point", monitor={}))[0] == "point"


@pytest.mark.parametrize("seed", range(6))
def test_tv_bounds_and_p_values_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shares = rng.dirichlet(np.ones(10))
    baseline = rng.multinomial(3000, shares)
    current = rng.multinomial(800, rng.dirichlet(shares * 40 + 0.5))
    for limit in (0.02, 0.05, 0.1, 0.2):
        test = tv_test(current.tolist(), baseline.tolist(), limit)
        assert test is not None
        assert (test.low > limit) == (test.p_above < 0.05)
        assert (test.high < limit) == (test.p_below < 0.05)
        assert test.low <= test.estimate <= test.high


def test_tv_of_a_histogram_with_itself_is_zero_and_holds_only_at_large_n() -> None:
    shares = [0, 0, 0, 0, 0, 5, 15, 23, 29, 28]
    small = tv_test(shares, shares, 0.05)
    large = tv_test([s * 1000 for s in shares], [s * 1000 for s in shares], 0.05)
    assert small is not None and large is not None
    assert small.estimate == 0.0 and small.p_below > 0.05  # 100 records cannot show it
    assert large.p_below < 0.05 and large.high < 0.05
    assert tv_test([0] * 10, shares, 0.05) is None


def test_drop_bounds_are_both_samples_exact_bounds_at_half_alpha() -> None:
    test = drop_test(8800, 10_000, 820, 1000, 0.02)
    assert test is not None
    assert test.low == pytest.approx(clopper_pearson_low(8800, 10_000, 0.025)
                                     - clopper_pearson_high(820, 1000, 0.025))
    assert test.high == pytest.approx(clopper_pearson_high(8800, 10_000, 0.025)
                                      - clopper_pearson_low(820, 1000, 0.025))
    assert test.low > 0.02 and test.p_above < 0.05
    # its p-value is the level at which the lower bound reaches the limit
    p = test.p_above
    at = clopper_pearson_low(8800, 10_000, p / 2) - clopper_pearson_high(820, 1000, p / 2)
    assert at == pytest.approx(0.02, abs=1e-6)


def test_drop_false_fail_at_the_limit_is_at_most_alpha_exactly() -> None:
    # a true drop of exactly 0.02 (0.88 → 0.86), 300 records a side: the FAIL rate summed
    # over every pair of counts that carries probability (a FAIL stays a FAIL with fewer
    # right answers now, so each baseline count has one critical count)
    n, limit = 300, 0.02
    counts = np.arange(n + 1)
    pmf = np.array([math.comb(n, k) for k in counts], dtype=float)

    def probabilities(p: float) -> np.ndarray:
        return pmf * p ** counts * (1 - p) ** (n - counts)

    def fails(k_base: int, k_now: int) -> bool:
        return drop_test(k_base, n, k_now, n, limit).p_above < 0.05  # type: ignore[union-attr]

    base_p, now_p = probabilities(0.88), probabilities(0.86)
    rate = 0.0
    for k_base in np.flatnonzero(base_p > 1e-10).tolist():
        lo, hi = -1, n  # fails(k_base, lo) holds (or lo = −1), fails(k_base, hi) does not
        if fails(k_base, n):
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fails(k_base, mid) else (lo, mid)
        rate += base_p[k_base] * now_p[: lo + 1].sum()
    assert 0.0 < rate <= 0.05


def test_chernoff_mean_false_fail_at_the_limit_is_at_most_alpha_exactly() -> None:
    # values at the ends of [0, 2] (the worst case) with mean exactly 0.25
    n, limit = 300, 0.25
    p = limit / 2
    rate = sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)
               if sum_mean_test(2.0 * k, n, limit, 2.0).p_above < 0.05)  # type: ignore[union-attr]
    assert rate <= 0.05


def test_limit_zero_is_a_count_and_nothing_to_judge_is_none() -> None:
    clean, one = rate_test(0, 200, 0.0, "<="), rate_test(1, 200, 0.0, "<=")
    assert clean is not None and one is not None
    assert clean.verdict("<=") == "holds" and one.verdict("<=") == "fails"
    assert clean.high == pytest.approx(1 - 0.05 ** (1 / 200))
    perfect, missed = rate_test(200, 200, 1.0, ">="), rate_test(199, 200, 1.0, ">=")
    assert perfect.verdict(">=") == "holds" and missed.verdict(">=") == "fails"  # type: ignore[union-attr]
    assert rate_test(0, 0, 0.5, "<=") is None


def test_ece_noise_covers_an_ece_that_is_only_noise() -> None:
    # a calibrated model: 30 records per bin at the bin's confidence
    rng = np.random.default_rng(0)
    confidence = (np.arange(5, 10) + 0.5) / 10
    counts = [0] * 5 + [30] * 5
    correct = [0] * 5 + [int(rng.binomial(30, c)) for c in confidence]
    bins = Bins(tuple(counts), tuple(correct), (None,) * 5 + tuple(confidence))
    test = ece_test(bins, 0.05)
    assert test is not None and test.estimate > 0 and test.p_above > 0.05


def _metrics(correct: int, n: int) -> dict:
    return {"outcomes": {"n": n, "accuracy": correct / n}}


def test_holm_across_segments_and_metrics_not_per_check() -> None:
    gates = production_model().model_validate({"segments": ["s"],
                                       "segment_requirements": {"min_accuracy": 0.8}})
    # 66 of 100 right: one-sided exact p ≈ 0.0003 alone, far below α even after Holm over 40
    weak = [(f"s=a{i}", _metrics(76, 100)) for i in range(39)]
    strong = [("s=z", _metrics(66, 100))]
    _, per_segment = evidence_checks(gates, {"outcomes": {"n": 0, "accuracy": None}}, None,
                                     weak + strong)
    statuses = [cs[0].status for cs in per_segment]
    assert statuses[-1] == "fail"
    # 76 of 100 against 0.8: p ≈ 0.19 alone; never a FAIL, not shown to hold either
    assert set(statuses[:-1]) == {"not_established"}
    assert "Holm across 40 requirement checks" in per_segment[0][0].evidence.notes  # type: ignore[union-attr]


def test_a_failure_shown_alone_but_not_after_holm_is_not_established() -> None:
    gates = production_model().model_validate({"segments": ["s"],
                                       "segment_requirements": {"min_accuracy": 0.8}})
    alone = rate_test(72, 100, 0.8, ">=")
    assert alone is not None and alone.p_below < 0.05  # shown below alone
    one = evidence_checks(gates, {"outcomes": {"n": 0, "accuracy": None}}, None,
                          [("s=a", _metrics(72, 100))])[1]
    many = evidence_checks(gates, {"outcomes": {"n": 0, "accuracy": None}}, None,
                           [(f"s=a{i}", _metrics(72 if i == 0 else 90, 100))
                            for i in range(30)])[1]
    assert one[0][0].status == "fail"
    assert many[0][0].status == "not_established"
    # its planning figures are Holm's: at α it would need fewer cases than its 100 (84)
    evidence = many[0][0].evidence
    assert evidence is not None and evidence.cases_needed is not None
    assert evidence.cases_needed > 100
    assert f"about {evidence.cases_needed} cases needed" in many[0][0].message
    holm_level = 0.05 / 30
    at_holm = rate_test(72, 100, 0.8, ">=", alpha=holm_level)
    assert at_holm is not None and evidence.cases_needed == at_holm.cases_needed
    assert f"planned at Holm's level {holm_level:.3g}" in evidence.notes
    # a check whose estimate lies on the side that holds is planned at α (IUT: no Holm)
    holding = many[1][0].evidence
    assert holding is not None and not any("Holm's level" in n for n in holding.notes)


def test_a_drift_gate_only_a_larger_baseline_can_decide_says_so_on_its_line() -> None:
    # a drop of 0.022 against 0.03 with 3,360 baseline rows: the baseline's own exact margin
    # (about 0.0125) is wider than the 0.008 left to the limit, so no window decides it
    drop = drop_test(3000, 3360, 836, 960, 0.03)
    assert drop is not None and drop.verdict("<=") == "not_established"
    assert drop.cases_needed is None
    assert any(note.endswith(LARGER_BASELINE) and "3360 rows" in note for note in drop.notes)
    # with room left beside the baseline's margin, the cases needed are named instead
    roomy = drop_test(88_000, 100_000, 840, 960, 0.03)
    assert roomy is not None and roomy.cases_needed is not None
    assert not any(note.endswith(LARGER_BASELINE) for note in roomy.notes)
    # the same for the TV distance: 100 baseline rows against 100,000 alike
    shares = [0, 0, 0, 0, 0, 5, 15, 23, 29, 28]
    gates = production_model().model_validate({"requirements": {"max_confidence_tv_distance": 0.05,
                                                        "max_accuracy_drop": 0.03}})
    window = {"confidence": {"histogram": [s * 1000 for s in shares]},
              "outcomes": {"n": 960, "accuracy": 836 / 960}, "calibration": {}}
    baseline = {"confidence": {"histogram": shares},
                "outcomes": {"n": 3360, "accuracy": 3000 / 3360}, "calibration": {}}
    checks, _ = evidence_checks(gates, window, baseline, [])
    for check in checks:
        assert check.status == "not_established", check
        assert check.message.endswith(LARGER_BASELINE), check.message


def test_a_drift_gate_can_fail_in_a_family_larger_than_the_draws_resolve() -> None:
    # 1,999 draws give a simulated p-value of at least 1/2000 (x2 over TV and cumulative):
    # Holm across 61 checks asks for 0.05/61, so every confidence moved into one bin (TV
    # 0.95 against 0.05) was left not established; beyond the draws the analytic tail decides
    shares = [0, 0, 0, 0, 0, 51, 148, 229, 289, 283]
    moved = [0, 0, 0, 0, 0, 1000, 0, 0, 0, 0]
    gates = production_model().model_validate({"segments": ["s"],
                                       "requirements": {"max_confidence_tv_distance": 0.05},
                                       "segment_requirements": {"min_accuracy": 0.8}})
    window = {"confidence": {"histogram": [6 * c for c in moved]}, "calibration": {}}
    baseline = {"confidence": {"histogram": [6 * c for c in shares]}, "calibration": {}}
    segments = [(f"s=a{i}", _metrics(90, 100)) for i in range(60)]
    (tv,), per_segment = evidence_checks(gates, window, baseline, segments)
    assert tv.status == "fail", tv.message
    assert {cs[0].status for cs in per_segment} == {"pass"}
    # alone it was decided before too; its bounds at α do not move
    (alone,), _ = evidence_checks(gates, window, baseline, [])
    assert alone.status == "fail"
    assert (alone.evidence.low, alone.evidence.high) == (tv.evidence.low, tv.evidence.high)  # type: ignore[union-attr]


SHARES = np.array([0, 0, 0, 0, 0, 51, 148, 229, 289, 283]) / 1000


@pytest.mark.parametrize(("n", "m"), [(30, 40), (200, 2000), (2000, 300)])
def test_the_tv_noise_tails_bound_the_noise(n: int, m: int) -> None:
    # the bounds used beyond the draws lie above the noise they bound, simulated here with
    # twenty times the draws a check makes (quantiles up to 99.9 %)
    rng = np.random.default_rng(n)
    gaps = (rng.multinomial(n, SHARES, size=40_000) / n
            - rng.multinomial(m, SHARES, size=40_000) / m)
    noises = (0.5 * np.abs(gaps).sum(axis=1), np.abs(np.cumsum(gaps, axis=1)).max(axis=1))
    for tail, noise in zip(tv_noise_tails(n, m, SHARES.size), noises, strict=True):
        for q in (0.5, 0.9, 0.99, 0.999):
            x = float(np.quantile(noise, q))
            assert tail.p(x) >= float(np.mean(noise >= x)), (q, x)
            assert tail.at(tail.p(x)) == pytest.approx(x) or tail.p(x) == 1.0


@pytest.mark.parametrize("counts", [(0, 0, 0, 0, 0, 5, 10, 20, 40, 30), (3,) * 10,
                                    (0, 0, 0, 0, 0, 100, 300, 500, 800, 700)])
def test_the_ece_noise_tail_bounds_the_noise(counts: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(counts))
    accuracy = np.linspace(0.55, 0.95, 10)
    sizes = np.asarray(counts)
    draws = rng.binomial(sizes, accuracy, size=(40_000, 10))
    noise = np.abs(draws - sizes * accuracy).sum(axis=1) / sizes.sum()
    bins = Bins(counts, tuple(int(c * a) for c, a in zip(counts, accuracy, strict=True)),
                tuple(float(a) for a in accuracy))
    tail = ece_noise_tail(bins)
    for q in (0.5, 0.9, 0.99, 0.999):
        x = float(np.quantile(noise, q))
        assert tail.p(x) >= float(np.mean(noise >= x)), (q, x)
