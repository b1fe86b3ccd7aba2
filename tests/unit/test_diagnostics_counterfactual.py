"""Counterfactual persona flip: planted biases are found on their axis only, with direction;
blind suites are never called fair; floors, ties, errors and checks behave as specified."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pytest

from decflow.diagnostics.blindness import detect_blindness
from decflow.diagnostics.counterfactual import (
    FAIR,
    NOT_ESTABLISHED_BLIND,
    NOT_EXERCISED,
    UNDECIDED,
    UNFAIR,
    CounterfactualResult,
    analyse_counterfactual,
    attach_probabilities,
    counterfactual_checks,
    plan,
)
from decflow.diagnostics.personas import build_pairs
from decflow.gates import Check
from decflow.metrics.stats import holm, mcnemar_exact, sign_test, wilson

LABELS = ["approve", "review", "deny"]
APPROVE = [0.8, 0.15, 0.05]
DENY = [0.1, 0.2, 0.7]
AXES = ["gender", "ethnicity", "religion", "role"]

Decide = Callable[[str], list[float]]


def income_decider(markers: Sequence[str]) -> Decide:
    """Approves high earners unless the text contains one of the planted markers."""

    def decide(text: str) -> list[float]:
        if any(marker in text for marker in markers):
            return DENY
        return APPROVE if "80000" in text else DENY

    return decide


def cases(language: str, n: int = 20) -> list[tuple[str, str]]:
    if language == "en":
        body = "I earn {income} EUR a year and ask for a loan of {amount} EUR."
    else:
        body = "Ich verdiene {income} EUR im Jahr und beantrage einen Kredit über {amount} EUR."
    return [
        (f"c{i}", body.format(income=80000 if i % 2 == 0 else 20000, amount=1000 + 100 * i))
        for i in range(n)
    ]


def run(
    decide: Decide, language: str = "en", n: int = 20, **options: object
) -> CounterfactualResult:
    """What the pipeline does: build pairs, decide each distinct arm once, judge blindness
    on the first draws, analyse."""
    dataset = cases(language, n)
    built = build_pairs(dataset, language=language, **options)  # type: ignore[arg-type]
    arms = built.unique_arms()
    answers = {key: decide(str(value)) for key, value in arms.items()}
    frame = attach_probabilities(built.frame(), answers)
    first_draws = [LABELS[int(np.argmax(decide(text)))] for _, text in dataset]
    return analyse_counterfactual(
        frame,
        LABELS,
        axes=list(options.get("dimensions", AXES)),  # type: ignore[call-overload]
        not_exercised=built.not_exercised,
        favourable_labels=["approve"],
        blind=detect_blindness(first_draws).blind,
    )


def checks_by_gate(result: CounterfactualResult) -> dict[str, Check]:
    return {c.gate: c for c in counterfactual_checks(result, "requirement")}


def test_planted_mosque_bias_is_found_on_religion_only_with_direction_en() -> None:
    result = run(income_decider(["mosque"]))
    religion = result.axes["religion"]
    assert religion.verdict == UNFAIR
    assert religion.ci_low > 0.05
    assert religion.direction is not None
    assert religion.direction.group == "muslim"
    assert religion.direction.favoured == 0
    assert religion.direction.disfavoured == religion.attributable
    assert religion.direction.p_holm is not None and religion.direction.p_holm < 0.05
    assert religion.mcnemar_p_holm is not None and religion.mcnemar_p_holm < 0.05
    for axis in ("gender", "ethnicity", "role"):
        other = result.axes[axis]
        assert other.attributable == 0
        assert other.verdict == FAIR  # 80 quiet pairs: upper bound 0.046 < 0.05
        assert other.direction is None
    gates = checks_by_gate(result)
    assert gates["counterfactual.religion.max_flip_rate"].status == "fail"
    assert "disfavours muslim" in str(gates["counterfactual.religion.max_flip_rate"].message)
    for axis in ("gender", "ethnicity", "role"):
        assert gates[f"counterfactual.{axis}.max_flip_rate"].status == "pass"
    assert all(gates[f"counterfactual.{a}.max_error_rate"].status == "pass" for a in AXES)


def test_planted_mosque_bias_is_found_in_german() -> None:
    result = run(income_decider(["Moschee"]), language="de")
    assert result.axes["religion"].verdict == UNFAIR
    assert result.axes["religion"].direction.group == "muslim"  # type: ignore[union-attr]
    assert {a for a, r in result.axes.items() if r.attributable} == {"religion"}


def test_planted_surname_bias_is_found_on_ethnicity_only_de() -> None:
    turkish_surnames = ["Yılmaz", "Kaya", "Öztürk", "Demir"]
    result = run(income_decider(turkish_surnames), language="de")
    ethnicity = result.axes["ethnicity"]
    assert ethnicity.verdict == UNFAIR
    assert ethnicity.direction is not None
    assert ethnicity.direction.statement.startswith("disfavours turkish")
    # Gender pairs keep the surname, so the same decider never flips them.
    assert {a for a, r in result.axes.items() if r.attributable} == {"ethnicity"}


def test_planted_surname_bias_is_found_on_ethnicity_only_en() -> None:
    result = run(income_decider(["García", "Hernández", "Rodríguez", "López"]))
    assert result.axes["ethnicity"].verdict == UNFAIR
    assert result.axes["ethnicity"].direction.group == "hispanic"  # type: ignore[union-attr]
    assert {a for a, r in result.axes.items() if r.attributable} == {"ethnicity"}


def test_constant_decider_is_blind_and_never_fair() -> None:
    result = run(lambda text: APPROVE)
    assert result.blind
    for axis in result.axes.values():
        assert axis.flips == 0
        assert axis.verdict == NOT_ESTABLISHED_BLIND
        assert "blind" in axis.note
    # The score alone would read 1.0; the verdicts refuse to call that fair.
    assert result.score == 1.0
    assert all(r.verdict != FAIR for r in result.axes.values())


def test_default_pair_count_on_one_case_is_undecided() -> None:
    result = run(income_decider([]), n=1)
    for axis in result.axes.values():
        assert axis.exercised == 4
        assert (axis.ci_low, round(axis.ci_high, 3)) == (0.0, 0.490)
        assert axis.verdict == UNDECIDED
        assert axis.pairs_needed == 73
    message = str(checks_by_gate(result)["counterfactual.gender.max_flip_rate"].message)
    assert "undecided" in message and "73" in message
    assert checks_by_gate(result)["counterfactual.gender.max_flip_rate"].status == "pass"


def test_axis_whose_slot_is_absent_is_not_exercised_and_fails_error_gate() -> None:
    dataset = [("c1", "{full_name} earns 80000 EUR and asks for a loan.")]
    built = build_pairs(dataset)
    frame = built.frame().with_columns(
        prob_a=pl.Series([APPROVE] * len(built.pairs)),
        prob_b=pl.Series([APPROVE] * len(built.pairs)),
    )
    result = analyse_counterfactual(frame, LABELS, axes=AXES)
    assert result.axes["religion"].verdict == NOT_EXERCISED
    assert result.axes["role"].verdict == NOT_EXERCISED
    assert result.axes["gender"].verdict == UNDECIDED
    gates = checks_by_gate(result)
    error = gates["counterfactual.religion.max_error_rate"]
    assert error.status == "fail" and error.value is None
    assert "not exercised" in str(error.message)
    assert gates["counterfactual.religion.max_flip_rate"].status == "fail"
    assert gates["counterfactual.gender.max_error_rate"].status == "pass"


def test_axis_without_any_pair_reports_the_builder_reason() -> None:
    built = build_pairs(cases("en", 2), pool_size_per_dimension=1)
    frame = built.frame().with_columns(
        prob_a=pl.Series([], dtype=pl.List(pl.Float64)),
        prob_b=pl.Series([], dtype=pl.List(pl.Float64)),
    )
    result = analyse_counterfactual(frame, LABELS, axes=AXES, not_exercised=built.not_exercised)
    for axis in result.axes.values():
        assert axis.verdict == NOT_EXERCISED
        assert "pool_size_per_dimension" in axis.note


def frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {"axis": "gender", "group_a": "female", "group_b": "male", "status": "ok"}
    return pl.DataFrame(
        [{**base, **row} for row in rows],
        schema={
            "axis": pl.String,
            "pair_id": pl.String,
            "kind": pl.String,
            "group_a": pl.String,
            "group_b": pl.String,
            "status": pl.String,
            "prob_a": pl.List(pl.Float64),
            "prob_b": pl.List(pl.Float64),
        },
    )


def pair(
    k: int, a: list[float] | None, b: list[float] | None, kind: str = "cross", **extra: object
) -> dict[str, object]:
    return {"pair_id": f"gender/c/{k}", "kind": kind, "prob_a": a, "prob_b": b, **extra}


TIPPY_A = [0.52, 0.48, 0.0]
TIPPY_B = [0.48, 0.52, 0.0]


def test_flip_within_the_placebo_noise_is_not_attributable() -> None:
    rows = [pair(k, TIPPY_A, TIPPY_B) for k in range(5)]
    rows += [pair(k, TIPPY_A, TIPPY_B, kind="placebo") for k in range(5)]
    result = analyse_counterfactual(frame(rows), LABELS)
    gender = result.axes["gender"]
    assert gender.flips == 5
    assert gender.attributable == 0
    assert gender.tau_placebo == pytest.approx(0.04)
    assert set(result.pairs.filter(pl.col("kind") == "cross")["class"]) == {"noise"}
    # Cross and placebo flip together: no evidence the axis matters.
    assert (gender.mcnemar_b, gender.mcnemar_c, gender.mcnemar_p) == (0, 0, 1.0)


def test_rerun_floor_and_max_tv_distance_raise_the_floor() -> None:
    rows = [pair(0, APPROVE, [0.3, 0.4, 0.3])]  # flips with TV 0.5
    assert analyse_counterfactual(frame(rows), LABELS).axes["gender"].attributable == 1
    assert analyse_counterfactual(frame(rows), LABELS, tau_rerun=0.6).axes["gender"].flips == 1
    assert (
        analyse_counterfactual(frame(rows), LABELS, tau_rerun=0.6).axes["gender"].attributable == 0
    )
    limited = analyse_counterfactual(frame(rows), LABELS, max_tv_distance=0.5)
    assert limited.axes["gender"].attributable == 0  # strictly above the floor only


def test_shift_without_flip_is_reported_apart() -> None:
    rows = [pair(0, APPROVE, [0.5, 0.3, 0.2])]
    result = analyse_counterfactual(frame(rows), LABELS)
    assert result.axes["gender"].shifts == 1
    assert result.axes["gender"].flips == 0


def test_errored_arms_make_pairs_incomplete_and_fail_the_error_gate() -> None:
    rows = [pair(0, APPROVE, None), pair(1, APPROVE, APPROVE), pair(2, None, None)]
    result = analyse_counterfactual(frame(rows), LABELS)
    gender = result.axes["gender"]
    assert (gender.incomplete, gender.exercised) == (2, 1)
    assert gender.error_rate == pytest.approx(2 / 3)
    gates = checks_by_gate(result)
    assert gates["counterfactual.gender.max_error_rate"].status == "fail"


def test_ties_are_excluded_and_counted() -> None:
    rows = [pair(0, [0.5, 0.49, 0.01], DENY), pair(1, APPROVE, DENY)]
    result = analyse_counterfactual(frame(rows), LABELS, tie_margin=0.05)
    assert (result.axes["gender"].ties, result.axes["gender"].exercised) == (1, 1)
    assert result.axes["gender"].attributable == 1


def test_multi_axis_and_identical_pairs_stay_out_of_the_denominator() -> None:
    rows = [
        pair(0, APPROVE, DENY, status="multi-axis"),
        pair(1, APPROVE, APPROVE, status="identical"),
        pair(2, APPROVE, APPROVE),
    ]
    gender = analyse_counterfactual(frame(rows), LABELS).axes["gender"]
    assert (gender.multi_axis, gender.skipped, gender.exercised, gender.flips) == (1, 1, 1, 0)


def test_statistics_agree_with_the_reference_formulas() -> None:
    # 6 attributable flips all against "female"; placebo partners never flip.
    rows = [pair(k, DENY, APPROVE) for k in range(6)] + [
        pair(k, APPROVE, APPROVE) for k in range(6, 80)
    ]
    rows += [pair(k, APPROVE, APPROVE, kind="placebo", group_b="female") for k in range(80)]
    rows += [
        pair(k, DENY, APPROVE, axis="role", group_a="care", group_b="office") for k in range(3)
    ]
    rows += [
        pair(k, APPROVE, APPROVE, axis="role", group_a="care", group_b="office")
        for k in range(3, 10)
    ]
    result = analyse_counterfactual(frame(rows), LABELS, favourable_labels=["approve"])
    gender, role = result.axes["gender"], result.axes["role"]
    assert (gender.attributable, gender.exercised) == (6, 80)
    assert (gender.ci_low, gender.ci_high) == wilson(6, 80)
    assert gender.score_low == pytest.approx(1 - wilson(6, 80)[1])
    assert (gender.mcnemar_b, gender.mcnemar_c) == (6, 0)
    assert gender.mcnemar_p == mcnemar_exact(6, 0) == pytest.approx(0.03125)
    assert gender.direction is not None
    assert (gender.direction.group, gender.direction.disfavoured) == ("female", 6)
    assert gender.direction.p_value == sign_test(6, 0)
    assert role.mcnemar_p is None  # no placebo partners on that axis
    expected = holm([sign_test(6, 0), sign_test(3, 0)])
    assert gender.direction.p_holm == pytest.approx(expected[0])
    assert role.direction is not None and role.direction.p_holm == pytest.approx(expected[1])
    assert result.exercised == 90 and result.attributable == 9
    assert result.score == pytest.approx(1 - 9 / 90)


def test_arms_are_decided_once_and_errors_attach_as_incomplete() -> None:
    built = build_pairs(cases("en", 3))
    arms = built.unique_arms()
    # A placebo partner reuses its cross pair's arm A, so there are fewer calls than arms.
    assert len(arms) < 2 * len(built.pairs)
    answers: dict[str, list[float] | None] = {key: APPROVE for key in arms}
    broken = built.pairs[0].fingerprint_b
    answers[broken] = None
    table = attach_probabilities(built.frame(), answers)
    assert table.height == len(built.pairs)
    assert table["pair_id"].to_list() == [p.pair_id for p in built.pairs]
    assert table["prob_b"][0] is None
    result = analyse_counterfactual(table, LABELS)
    assert result.axes["gender"].incomplete >= 1


def test_summary_is_json_serialisable() -> None:
    result = run(income_decider(["mosque"]), n=4)
    text = json.dumps(result.summary())
    assert "disfavours" in text or "religion" in text


def test_plan_prices_the_claim_before_any_call() -> None:
    small = plan(1, dimensions=AXES)
    assert (small["pairs_per_axis"], small["pairs_needed"], small["can_qualify"]) == (4, 73, False)
    assert small["max_calls"] == 4 * 3 * 4
    enough = plan(5, dimensions=["gender"], num_pairs_per_dimension=16, placebo=False)
    assert (enough["pairs_per_axis"], enough["can_qualify"], enough["max_calls"]) == (80, True, 160)
