"""Stability meter and blindness detector: pairing, tri-state edges, advice and checks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from decflow.diagnostics.blindness import (
    blindness_check,
    describe,
    detect_blindness,
    mark_vacuous,
)
from decflow.diagnostics.stability import measure_stability, oracle_guidance, stability_check
from decflow.gates import make_check


def rerun_table(
    answers: dict[str, list[int | None]], probabilities: bool = True, labels: int = 3
) -> pl.DataFrame:
    """One row per rerun; a None answer is an errored rerun."""
    rows = []
    for case, series in answers.items():
        for repeat, sel in enumerate(series):
            probs = None
            if sel is not None and probabilities:
                probs = [0.1 / (labels - 1)] * labels
                probs[sel] = 0.9
            rows.append(
                {
                    "case_id": case,
                    "repeat": repeat,
                    "selected": sel,
                    "probabilities": probs,
                    "error_kind": None if sel is not None else "timeout",
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "case_id": pl.String,
            "repeat": pl.Int64,
            "selected": pl.Int64,
            "probabilities": pl.List(pl.Float64),
            "error_kind": pl.String,
        },
    )


def test_pairs_are_consecutive_and_disjoint() -> None:
    # (0,0) agree, (1,0) flip; a flip across pair boundaries (0→1 between reruns 2 and 3)
    # is not a pair of its own.
    result = measure_stability(rerun_table({"a": [0, 0, 1, 0]}))
    assert (result.pairs, result.flips) == (2, 1)
    result = measure_stability(rerun_table({"a": [0, 1, 1, 0]}))
    assert (result.pairs, result.flips) == (2, 2)
    result = measure_stability(rerun_table({"a": [0, 0, 1, 1]}))
    assert (result.pairs, result.flips) == (2, 0)
    assert result.cases_with_flip == 1


def test_rows_are_paired_in_repeat_order_not_table_order() -> None:
    table = rerun_table({"a": [0, 0, 1, 1], "b": [2, 2]}).reverse()
    result = measure_stability(table)
    assert (result.pairs, result.flips, result.n_cases) == (3, 0, 2)


def test_odd_last_repeat_is_outside_the_interval_but_counts_as_case_flip() -> None:
    result = measure_stability(rerun_table({"a": [0, 0, 0, 0, 1], "b": [1, 1, 1, 1, 1]}))
    assert result.pairs == 4
    assert result.flips == 0
    assert result.cases_with_flip == 1
    assert result.repeats == 5


def test_zero_pairs_is_undecided() -> None:
    result = measure_stability(rerun_table({"a": [0], "b": [1]}))
    assert result.pairs == 0 and result.measured_cases == 0
    assert result.flip_rate is None
    assert (result.ci_low, result.ci_high) == (0.0, 1.0)
    assert result.verdict == "undecided"
    empty = measure_stability(rerun_table({}))
    assert empty.verdict == "undecided"
    assert empty.n_cases == 0


def test_errored_rerun_makes_the_case_incomplete_not_agreeing() -> None:
    result = measure_stability(rerun_table({"a": [None, None, 0, 0], "b": [1, 1, 1, 1]}))
    assert result.n_incomplete == 1
    assert result.n_cases == 1
    assert result.pairs == 2  # only case b
    check = stability_check(result, "requirement")
    assert "left out" in check.message


def test_a_meter_without_a_complete_pair_is_not_exercised_and_fails() -> None:
    every_case_errored = measure_stability(rerun_table({"a": [0, None], "b": [None, 1]}))
    assert every_case_errored.pairs == 0 and every_case_errored.n_incomplete == 2
    check = stability_check(every_case_errored, "requirement")
    assert (check.status, check.value) == ("fail", None)
    assert "not exercised" in check.message and "2 case(s)" in check.message
    single_draws = measure_stability(rerun_table({"a": [0], "b": [1]}))
    warning = stability_check(single_draws, "warning")
    assert warning.status == "warn" and "no case had two reruns" in warning.message


def test_quiet_reruns_with_few_cases_are_not_established_and_say_what_to_add() -> None:
    # Four cases at five repeats: eight quiet pairs, but only four sampling units.
    result = measure_stability(rerun_table({f"c{i}": [0] * 5 for i in range(4)}), epsilon=0.01)
    assert (result.pairs, result.flips, result.measured_cases) == (8, 0, 4)
    assert result.verdict == "undecided"
    assert result.cases_needed is not None and result.cases_needed > 298  # ≥ exact 0-of-n
    assert f"{result.cases_needed} cases" in result.advice
    check = stability_check(result, "warning")
    assert check.status == "not_established"
    assert check.gate == "stability.verdict" and check.metric == "stability.flip_rate"
    assert f"about {result.cases_needed} cases needed" in check.message
    assert check.evidence is not None and check.evidence.n == 4


def test_many_repeats_on_few_cases_do_not_make_a_meter_deterministic() -> None:
    # Four cases at 38 repeats: 76 quiet pairs. Pooled as independent pairs they gave
    # [0, 0.048] ("deterministic"); the reruns of a case are one unit, so four cases cannot.
    result = measure_stability(rerun_table({f"c{i}": [i % 3] * 38 for i in range(4)}))
    assert (result.pairs, result.flips) == (76, 0)
    assert result.verdict == "undecided" and result.ci_high > 0.05


def test_quiet_reruns_on_enough_cases_are_deterministic() -> None:
    # One pair per case: the exact binomial bound 1 − 0.05^(1/n) is below 0.05 from n = 59.
    result = measure_stability(rerun_table({f"c{i}": [i % 3] * 2 for i in range(59)}))
    assert result.method.startswith("exact binomial")
    assert result.ci_high == pytest.approx(1 - 0.05 ** (1 / 59))
    assert result.verdict == "deterministic"
    assert result.mean_tv == 0.0
    assert "decflow diff" in result.advice
    assert stability_check(result, "requirement").status == "pass"
    fewer = measure_stability(rerun_table({f"c{i}": [0, 0] for i in range(58)}))
    assert fewer.verdict == "undecided"  # 1 − 0.05^(1/58) = 0.0503: touching ε is undecided


def test_seeded_random_answers_are_stochastic_and_fail_the_gate() -> None:
    rng = np.random.default_rng(7)
    answers = {f"c{i}": rng.integers(0, 3, size=6).tolist() for i in range(20)}
    result = measure_stability(rerun_table(answers))
    assert result.pairs == 60
    assert result.method.startswith("Bentkus")  # three pairs per case: shares, not 0/1
    assert result.verdict == "stochastic"
    assert result.ci_low > 0.05
    assert result.mean_tv is not None and result.mean_tv > 0.3
    assert "not with zero" in result.advice
    check = stability_check(result, "requirement")
    assert check.status == "fail"
    assert check.value == result.flip_rate
    assert check.threshold == 0.05


def test_undecided_above_epsilon_sizes_toward_stochastic() -> None:
    # 1 flip in 13 cases: 7.7 % but the exact bounds straddle 5 %.
    answers = {f"c{i}": [0, 0] for i in range(12)} | {"x": [0, 1]}
    result = measure_stability(rerun_table(answers))
    assert result.verdict == "undecided"
    assert result.ci_low == pytest.approx(0.0039, abs=1e-4)  # Clopper-Pearson, 1 of 13
    assert result.cases_needed is not None and result.cases_needed > 13


def test_meter_works_without_probabilities() -> None:
    table = rerun_table({"a": [0, 1]}, probabilities=False).drop("probabilities")
    result = measure_stability(table)
    assert result.mean_tv is None
    assert result.flips == 1


def test_duplicate_repeat_index_is_refused() -> None:
    table = pl.concat([rerun_table({"a": [0, 0]}), rerun_table({"a": [0]})])
    with pytest.raises(ValueError, match="more than once"):
        measure_stability(table)


def test_blindness_skew_is_inclusive_and_single_input_is_blind() -> None:
    nine_of_ten = ["allow"] * 9 + ["block"]
    result = detect_blindness(nine_of_ten)
    assert (result.n, result.skew, result.modal_label, result.distinct) == (10, 0.9, "allow", 2)
    assert result.blind
    assert not detect_blindness(nine_of_ten, threshold=0.91).blind
    assert detect_blindness(["x"]).blind
    quickstart = detect_blindness(["allow", "block", "allow", "allow"])
    assert quickstart.skew == 0.75 and not quickstart.blind


def test_blindness_ties_go_to_first_seen_and_errors_are_left_out() -> None:
    result = detect_blindness(["b", "a", None, "a", "b"])
    assert result.n == 4
    assert result.modal_label == "b"
    assert detect_blindness([None, None]).skew is None


def test_blindness_counts_repeated_inputs_once() -> None:
    # An alternating decider asked the same question twice must not look constant.
    result = detect_blindness(["yes", "yes", "no"], inputs=["q1", "q1", "q2"])
    assert result.n == 2
    assert result.duplicates_dropped == 1
    assert result.skew == 0.5


def test_blindness_threshold_is_validated() -> None:
    for bad in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError):
            detect_blindness(["a"], threshold=bad)


def test_blindness_check_and_vacuous_marking() -> None:
    blind = detect_blindness(["deny"] * 12)
    check = blindness_check(blind, "warning")
    assert check.gate == "blindness.max_skew"
    assert check.status == "warn"
    assert blindness_check(blind, "requirement").status == "fail"
    # Skew equal to the threshold is blind: 9 of 10 at the default 0.9.
    assert blindness_check(detect_blindness(["a"] * 9 + ["b"]), "requirement").status == "fail"
    assert blindness_check(detect_blindness(["a"] * 8 + ["b"] * 2), "requirement").status == "pass"
    assert check.value == 1.0
    assert "blind" in describe(blind)
    checks = [
        make_check("min_accuracy", "requirement", "accuracy", ">=", 0.8, 1.0),
        make_check("case_swap.max_flip_rate", "requirement", "case_swap.flip_rate", "<=", 0, 0),
        make_check("counterfactual.gender.max_flip_rate", "warning", "x", "<=", 0.05, 0.5),
        check,
        make_check("case_swap.max_error_rate", "requirement", "case_swap.error_rate", "<=", 0, 0),
    ]
    marked = mark_vacuous(checks, blind)
    assert marked[0] == checks[0]
    assert "potentially vacuous" in marked[1].message
    assert marked[1].status == "pass"
    assert marked[2] == checks[2]
    assert marked[3] == checks[3]
    assert marked[4] == checks[4]  # answered cases are not made vacuous by blindness
    assert mark_vacuous(checks, detect_blindness(["a", "b"])) == checks
    failed = blindness_check(detect_blindness([None]), "requirement")
    assert failed.status == "fail" and failed.value is None


def test_oracle_guidance_precedence() -> None:
    blind = detect_blindness(["a"] * 5)
    varied = detect_blindness(["a", "b"])
    deterministic = measure_stability(rerun_table({f"c{i}": [0, 0] for i in range(80)}))
    undecided = measure_stability(rerun_table({"c": [0, 0]}))
    assert oracle_guidance(deterministic, blind).startswith("BLIND")
    assert oracle_guidance(deterministic, varied).startswith("STABLE")
    assert oracle_guidance(undecided, varied).startswith("UNDECIDED")
    assert oracle_guidance(None, None).startswith("NOT MEASURED")


def test_meter_accepts_selected_labels_as_strings() -> None:
    table = pl.DataFrame(
        {
            "case_id": ["a", "a", "a", "a", "b", "b"],
            "repeat": [0, 1, 2, 3, 0, 1],
            "selected": ["refund", "refund", "reject", "review", None, "refund"],
            "error_kind": [None, None, None, None, "timeout", None],
        }
    )
    result = measure_stability(table)
    assert (result.pairs, result.flips, result.n_incomplete, result.cases_with_flip) == (2, 1, 1, 1)
