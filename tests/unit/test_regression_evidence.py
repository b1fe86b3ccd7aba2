"""Paired regression evidence against hand-computed vectors: Tango's score statistic and
bounds, exact McNemar, the paired t bounds, rerun placebo pairs, the paired bootstrap, the
gating rule and the tri-state checks of an evidence-gated diff."""

from __future__ import annotations

import math

import numpy as np
import pytest

from decflow.gates.regression import decision_phrase, gate_evidence
from decflow.metrics.ece_change import ece_change_test, noise_norms
from decflow.metrics.golden_metrics import calibration_bin_index, reliability
from decflow.metrics.paired import paired_proportions, tango_bounds, tango_statistic
from decflow.metrics.paired_bootstrap import macro_f1_change
from decflow.metrics.regression_evidence import PairedDiff
from decflow.metrics.rerun_noise import placebo
from decflow.metrics.stats import sign_test

Z95 = 1.6448536269514722  # one-sided 95 %


def test_tango_statistic_by_hand() -> None:
    # b=12, c=4, n=50 at δ0 = 0.1: A = 100, B = -16 + (100 - 12 + 4)·0.1 = -6.8,
    # C = -4·0.1·0.9 = -0.36, p21 = (√(6.8² + 4·100·0.36) + 6.8) / 200,
    # Z = (12 - 4 - 5) / √(50·(2·p21 + 0.09)), with the numerator 3 - 1 corrected.
    p21 = (math.sqrt(6.8**2 + 144.0) + 6.8) / 200.0
    assert p21 == pytest.approx(0.1029637586, abs=1e-9)  # √190.24 = 13.7927517
    variance = 50 * (2 * p21 + 0.09)
    assert tango_statistic(12, 4, 50, 0.1, 0.0) == pytest.approx(3.0 / math.sqrt(variance))
    assert tango_statistic(12, 4, 50, 0.1) == pytest.approx(2.0 / math.sqrt(variance))
    # at δ0 = 0 it is McNemar's score statistic (b - c)/√(b + c), here corrected
    assert tango_statistic(30, 10, 1000, 0.0, 0.0) == pytest.approx(20 / math.sqrt(40))
    assert tango_statistic(30, 10, 1000, 0.0) == pytest.approx(19.0 / math.sqrt(40))
    # b=30, c=10, n=1000 at δ0 = 0.02: B = -0.4, C = -0.196, p21 = 0.01, Z = 0
    assert tango_statistic(30, 10, 1000, 0.02) == pytest.approx(0.0, abs=1e-12)


def test_tango_bounds_by_hand() -> None:
    # No discordant case: for δ > 0, Z(δ) = -(nδ - 1)/√(nδ(1 - δ)), so the upper bound
    # solves (n² + z²n)δ² - (2n + z²n)δ + 1 = 0 (larger root); the lower bound mirrors it.
    n, zz = 10, Z95**2
    a, b = n * n + zz * n, 2 * n + zz * n
    expected = (b + math.sqrt(b * b - 4 * a)) / (2 * a)
    low, high = tango_bounds(0, 0, n)
    assert high == pytest.approx(expected, abs=1e-10)
    assert low == pytest.approx(-high, abs=1e-10)
    # Each bound solves Z = ±z.
    low, high = tango_bounds(12, 4, 50)
    assert tango_statistic(12, 4, 50, low) == pytest.approx(Z95, abs=1e-6)
    assert tango_statistic(12, 4, 50, high) == pytest.approx(-Z95, abs=1e-6)
    assert low < 8 / 50 < high
    assert tango_bounds(5, 0, 5)[1] == 1.0  # every case newly wrong


def test_paired_proportions_against_a_margin() -> None:
    found = paired_proportions(30, 10, 1000, 0.02)
    assert found.estimate == 0.02
    assert found.p_above == pytest.approx(0.5) and found.p_below == pytest.approx(0.5)
    assert found.cases_needed is None  # exactly at the margin: no n decides it
    assert found.notes == (f"McNemar exact p = {sign_test(30, 10):.3g} (30 newly worse, "
                           "10 newly better; information)",)
    clear = paired_proportions(80, 10, 1000, 0.02)
    assert clear.low is not None and clear.low > 0.02 and clear.p_above < 0.05


def test_mcnemar_exact_by_hand() -> None:
    # the exact McNemar test is the sign test on the discordant cells: 2·P(X ≤ min(b, c))
    assert sign_test(6, 0) == 2 / 64
    assert sign_test(8, 2) == 2 * (1 + 10 + 45) / 1024
    assert sign_test(0, 0) == 1.0
    assert paired_proportions(8, 2, 40, 0.02).notes[0].startswith("McNemar exact p = 0.109 ")


def test_limit_zero_flips_are_counts() -> None:
    reruns = {f"c{i}": np.array([A]) for i in range(30)}
    quiet = _paired([A] * 30, [A] * 30, [0] * 30, reruns).attributed_flips(0.0)
    assert quiet is not None and quiet.verdict() == "holds"
    assert quiet.high == pytest.approx(1 - 0.05 ** (1 / 30))  # "0 of 30"
    flipped = _paired([A] * 30, [B] + [A] * 29, [0] * 30, reruns).attributed_flips(0.0)
    assert flipped is not None and not flipped.is_count  # judged as an excess, not raw


A, B, C = [0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1]


def test_placebo_pairs_by_hand() -> None:
    anchors = np.array([A, A, B])
    reruns = {"x": np.array([A, B]), "y": np.array([C])}  # "z" has no rerun
    found = placebo(["x", "y", "z"], np.array([0, 1, -1]), [(anchors, reruns)])
    assert found.pairs.tolist() == [2, 1, 0]
    assert found.flip[:2].tolist() == [0.5, 0.0] and math.isnan(found.flip[2])
    # TV(A, B) = 0.7, TV(A, C) = 0.2
    assert found.tv[:2] == pytest.approx([0.35, 0.2])
    # confidence 0.8 → 0.8 and 0.8 → 0.8 for x; 0.8 → 0.6 for y
    assert found.confidence[:2] == pytest.approx([0.0, 0.2])
    # x is labeled 0: correct, then wrong once → mean (Δ correct)² = 0.5; y: wrong, wrong
    assert found.correct_sq[:2].tolist() == [0.5, 0.0]


def _paired(before: list[list[float]], after: list[list[float]], expected: list[int],
            noise: dict[str, np.ndarray] | None = None) -> PairedDiff:
    ids = [f"c{i}" for i in range(len(before))]
    b, a, e = np.array(before), np.array(after), np.array(expected)
    found = None if noise is None else placebo(ids, e, [(a, noise)])
    none = np.zeros(len(before), dtype=bool)
    return PairedDiff(b, a, e, found, errored_before=none, errored_after=none,
                      calibration_bins=10)


def test_flips_without_noise_are_not_established_never_failed() -> None:
    paired = _paired([A] * 40, [B] * 40, [0] * 40)
    found = gate_evidence(paired, [], "max_answer_flip_rate", "answer_flip_rate",
                          "requirement", 0.02)
    assert found.evidence is None and found.verdict == "not_established"
    assert found.phrase == "answer flips not established: rerun noise not measured"


def test_flips_the_noise_explains_are_not_attributed() -> None:
    # Every case flips from A to B, and so do the candidate's own reruns (B vs A): no
    # excess at all. Betting on "below 0.02" gains a factor 1 + 0.02/0.98 per quiet case at
    # most, so a few hundred cases are needed before the upper bound clears the limit.
    reruns = {f"c{i}": np.array([A]) for i in range(300)}
    paired = _paired([A] * 300, [B] * 300, [0] * 300, reruns)
    found = paired.attributed_flips(0.02)
    assert found is not None and found.estimate == 0.0 and found.raw == 1.0
    assert found.noise == 1.0 and found.verdict() == "holds"


def test_accuracy_drop_phrase_reads_as_a_change_in_points() -> None:
    before = [A] * 100
    after = [B] * 10 + [A] * 90  # ten newly wrong cases of 100
    paired = _paired(before, after, [0] * 100)
    found = gate_evidence(paired, [], "max_accuracy_drop", "accuracy_drop", "requirement",
                          0.02)
    assert found.evidence is not None and found.evidence.estimate == pytest.approx(0.1)
    low, high = tango_bounds(10, 0, 100)
    assert (found.evidence.low, found.evidence.high) == (low, high)
    assert found.verdict == "fails"
    assert found.phrase == (f"accuracy -10.0 points [-{100 * high:.1f}, -{100 * low:.1f}]: "
                            "regressed")
    assert decision_phrase("accuracy_drop", found.evidence, "fails", "locale=de").startswith(
        "accuracy in locale=de -10.0 points")


def bins_of(confidence: np.ndarray) -> np.ndarray:
    return np.bincount(calibration_bin_index(confidence, 10), minlength=10).astype(float)


def test_paired_bootstrap_is_seeded_and_centred_on_the_observed_change() -> None:
    rng = np.random.default_rng(0)
    expected = rng.integers(0, 3, 300)
    noisy = np.where(rng.random(300) < 0.2, (expected + 1) % 3, expected)
    found = macro_f1_change(expected, expected, noisy, 3)
    assert found == macro_f1_change(expected, expected, noisy, 3)
    assert found.low is not None and found.high is not None and found.estimate is not None
    assert found.low < found.estimate < found.high < 0.0
    same = macro_f1_change(expected, expected, expected, 3)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)


def test_ece_change_bounds_allow_for_the_bias_of_each_run() -> None:
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.4, 1.0, 300)
    correct = rng.random(300) < confidence
    shifted = np.minimum(confidence + 0.1, 1.0)
    found = ece_change_test(confidence, correct, shifted, correct, 10, 0.05)
    assert found == ece_change_test(confidence, correct, shifted, correct, 10, 0.05)
    ece_before = reliability(confidence, correct, 10)[1]
    ece_after = reliability(shifted, correct, 10)[1]
    assert ece_before is not None and ece_after is not None
    assert found.estimate == pytest.approx(ece_after - ece_before)
    # Each run's ECE within its noise bound (the 97.5 % quantile of the L1 norm of
    # Gaussians with variance n_b/4 per bin); the better run's target not shown above 0.
    q_before = float(np.quantile(noise_norms(bins_of(confidence)), 0.975))
    q_after = float(np.quantile(noise_norms(bins_of(shifted)), 0.975))
    assert found.low == pytest.approx(max(0.0, ece_after - q_after) - ece_before - q_before)
    assert found.high == pytest.approx(ece_after + q_after - max(0.0, ece_before - q_before))
    assert found.low < found.estimate < found.high
    # The p-values are the levels at which the bounds reach the limit.
    assert found.p_below > 0.05 and found.p_above == 1.0


def test_segments_are_holm_adjusted_and_name_the_failing_one() -> None:
    from decflow.metrics.regression_evidence import SegmentRows

    # 300 cases in three segments of 100; only "de" loses 30 right answers
    before = [A] * 300
    after = [A] * 200 + [B] * 30 + [A] * 70
    paired = _paired(before, after, [0] * 300)
    segments = [SegmentRows("locale", name, np.arange(i * 100, (i + 1) * 100), True)
                for i, name in enumerate(("en", "fr", "de"))]
    segments.append(SegmentRows("locale", "it", np.arange(0), False))  # below the minimum
    found = gate_evidence(paired, segments, "max_segment_accuracy_drop",
                          "segment_accuracy_drop", "requirement", 0.05)
    assert found.verdict == "fails" and found.segment == "locale=de"
    assert [row["segment"] for row in found.segments] == ["locale=en", "locale=fr",
                                                          "locale=de"]
    assert found.phrase.startswith("accuracy in locale=de -30.0 points [")
    # with no drop anywhere, 100 cases a segment cannot show each one below 0.05 after Holm
    quiet = gate_evidence(_paired(before, before, [0] * 300), segments[:3],
                          "max_segment_accuracy_drop", "segment_accuracy_drop",
                          "requirement", 0.05)
    assert quiet.verdict in ("holds", "not_established")
    verdicts = {row["verdict"] for row in quiet.segments}
    assert quiet.verdict == ("holds" if verdicts == {"holds"} else "not_established")


def test_an_undecided_segment_is_planned_at_holms_level() -> None:
    from statistics import NormalDist

    from decflow.metrics.regression_evidence import SegmentRows

    # ten segments of 100 cases; "s0" loses 12 right answers against a limit of 0.05: alone
    # it fails (p 0.013), under Holm across ten it needs p < 0.005 and is not established
    before = [A] * 1000
    after = [B] * 12 + [A] * 988
    segments = [SegmentRows("seg", f"s{i}", np.arange(i * 100, (i + 1) * 100), True)
                for i in range(10)]
    found = dict((s.value, e) for s, e in
                 _paired(before, after, [0] * 1000).segment_drops(segments, 0.05))
    s0 = found["s0"]
    assert paired_proportions(12, 0, 100, 0.05).p_above < 0.05
    assert s0.verdict() == "not_established"
    # planned at 0.005: more cases than it has (at 0.05 the plan said 41, then 67)
    assert s0.cases_needed == paired_proportions(12, 0, 100, 0.05, alpha=0.005).cases_needed
    assert s0.cases_needed is not None and s0.cases_needed > 100
    assert "planned at Holm's level 0.005" in s0.evidence().notes
    # seeded simulation: with the drop truly 0.12, Holm's step for s0 (p < 0.005) is reached
    # in about half the diffs at the planned n (the figure's meaning), almost never at 41
    rng = np.random.default_rng(20261206)
    z = NormalDist().inv_cdf(1 - 0.005)

    def decided(n: int) -> float:
        return float(np.mean([tango_statistic(int(b), 0, n, 0.05) > z
                              for b in rng.binomial(n, 0.12, size=2000)]))

    assert 0.35 < decided(s0.cases_needed) < 0.65
    assert decided(41) < 0.02


def test_paired_proportions_plans_with_its_continuity_correction() -> None:
    # n' = n at the observed rates reproduces the test's own statistic: the plan at the
    # level of this check's own p-value is the n it has
    test = paired_proportions(12, 0, 100, 0.05)
    at_own_level = paired_proportions(12, 0, 100, 0.05, alpha=test.p_above)
    assert at_own_level.cases_needed == 100


def test_macro_f1_and_ece_changes_read_in_the_gates_direction() -> None:
    rng = np.random.default_rng(1)
    expected = rng.integers(0, 3, 400)
    right = np.eye(3)[expected] * 0.8 + 0.2 / 3
    wrong = np.eye(3)[(expected + 1) % 3] * 0.8 + 0.2 / 3
    worse = np.where((rng.random(400) < 0.6)[:, None], wrong, right)
    paired = _paired(right.tolist(), worse.tolist(), expected.tolist())
    drop = paired.macro_f1_drop(0.05)
    assert drop.estimate is not None and drop.estimate > 0.2 and drop.verdict() == "fails"
    # every answer 0.867 confident: ECE 0.133 before, 0.47 once 60 % of them are wrong;
    # each run's noise bound at 400 cases in one bin is about 0.056
    ece = paired.ece_increase(0.005)
    assert ece.estimate is not None and ece.estimate > 0 and ece.verdict() == "fails"
    same = _paired(right.tolist(), right.tolist(), expected.tolist())
    assert same.macro_f1_drop(0.05).verdict() == "holds"
