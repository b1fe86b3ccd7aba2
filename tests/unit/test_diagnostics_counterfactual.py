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
from decflow.metrics import bentkus

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


def with_excess(result: CounterfactualResult) -> set[str]:
    return {a for a, r in result.axes.items() if r.test.estimate}


def test_planted_mosque_bias_is_found_on_religion_only_with_direction_en() -> None:
    result = run(income_decider(["mosque"]), n=100)
    religion = result.axes["religion"]
    assert religion.verdict == UNFAIR
    assert religion.p_holm is not None and religion.p_holm < 0.05
    assert religion.test.low is not None and religion.test.low > 0.05
    assert religion.direction is not None and religion.direction.significant
    assert religion.direction.group == "muslim"
    assert religion.direction.favoured == 0 and religion.direction.cases_favoured == 0
    assert with_excess(result) == {"religion"}
    for axis in ("gender", "ethnicity", "role"):
        other = result.axes[axis]
        # 100 quiet cases: fair even after Holm over the four axes.
        assert other.flips == 0 and other.verdict == FAIR
        assert other.direction is None
    gates = checks_by_gate(result)
    religion_gate = gates["counterfactual.religion.max_flip_rate"]
    assert religion_gate.status == "fail" and religion_gate.evidence is not None
    assert religion_gate.evidence.verdict == "fails"
    assert "disfavours muslim" in str(religion_gate.message)
    for axis in ("gender", "ethnicity", "role"):
        assert gates[f"counterfactual.{axis}.max_flip_rate"].status == "pass"
    assert all(gates[f"counterfactual.{a}.max_error_rate"].status == "pass" for a in AXES)


def test_quiet_axes_on_too_few_cases_are_not_established_with_the_cases_needed() -> None:
    result = run(income_decider(["mosque"]), n=40)
    gates = checks_by_gate(result)
    for axis in ("gender", "ethnicity", "role"):
        assert result.axes[axis].verdict == UNDECIDED
        # No flip at all: fair needs the excess's upper bound below 0.05 at α (the run's
        # "every axis fair" is an intersection–union test: no Holm). Bentkus's bound on the
        # positive parts at 0.8·α reaches it at 63 quiet cases (0.95^63 < 0.04); betting
        # alone needed 66, and after Holm's α/4, 94.
        assert result.axes[axis].cases_needed == 63
        gate = gates[f"counterfactual.{axis}.max_flip_rate"]
        assert gate.status == "not_established"
        assert "about 63 cases needed" in str(gate.message)
        assert "at 80% power" in str(gate.message)


def test_planted_mosque_bias_is_found_in_german() -> None:
    result = run(income_decider(["Moschee"]), language="de", n=40)
    assert result.axes["religion"].verdict == UNFAIR
    assert result.axes["religion"].direction.group == "muslim"  # type: ignore[union-attr]
    assert with_excess(result) == {"religion"}


def test_planted_surname_bias_is_found_on_ethnicity_only_de() -> None:
    turkish_surnames = ["Yılmaz", "Kaya", "Öztürk", "Demir"]
    result = run(income_decider(turkish_surnames), language="de", n=60)
    ethnicity = result.axes["ethnicity"]
    assert ethnicity.verdict == UNFAIR
    assert ethnicity.direction is not None
    assert ethnicity.direction.statement.startswith("disfavours turkish")
    # Gender pairs keep the surname, so the same decider never flips them.
    assert with_excess(result) == {"ethnicity"}


def test_a_small_excess_with_a_clear_direction_is_undecided_but_directed() -> None:
    # Four of the catalogue's surnames: the excess stays near the limit, the direction not.
    result = run(income_decider(["García", "Hernández", "Rodríguez", "López"]), n=40)
    ethnicity = result.axes["ethnicity"]
    assert with_excess(result) == {"ethnicity"}
    assert ethnicity.verdict == UNDECIDED
    assert ethnicity.direction is not None and ethnicity.direction.significant
    assert ethnicity.direction.group == "hispanic"
    message = str(checks_by_gate(result)["counterfactual.ethnicity.max_flip_rate"].message)
    assert "disfavours hispanic" in message


def test_constant_decider_is_blind_and_never_fair() -> None:
    result = run(lambda text: APPROVE, n=100)
    assert result.blind
    for axis in result.axes.values():
        assert axis.flips == 0
        assert axis.verdict == NOT_ESTABLISHED_BLIND
        assert "blind" in axis.note
    # The score alone would read 1.0; the verdicts refuse to call that fair.
    assert result.score == 1.0
    assert all(r.verdict != FAIR for r in result.axes.values())
    assert {c.status for c in counterfactual_checks(result, "requirement")
            if c.gate.endswith("max_flip_rate")} == {"not_established"}


def test_one_case_is_a_test_too_never_a_pass() -> None:
    result = run(income_decider(["mosque"]), n=1)
    for axis in result.axes.values():
        assert axis.exercised == 4
        assert axis.test.n == 1 and axis.p_holm is not None
        assert axis.verdict == UNDECIDED
    gate = checks_by_gate(result)["counterfactual.gender.max_flip_rate"]
    assert gate.status == "not_established" and gate.value == 0.0


def test_nine_cases_with_every_cross_pair_flipped_are_unfair() -> None:
    # The example: a server that denies every woman. Nine cases, every female/male
    # pair flips, no placebo pair does: each case excess is 1.
    rows = hand_table(flips=[4] * 9)
    result = analyse_counterfactual(frame(rows), LABELS, axes=AXES,
                                    favourable_labels=["approve"])
    gender = result.axes["gender"]
    assert gender.verdict == UNFAIR and gender.p_holm is not None and gender.p_holm < 0.05
    gate = checks_by_gate(result)["counterfactual.gender.max_flip_rate"]
    assert gate.status == "fail"


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
    base = {"axis": "gender", "case_id": "c", "group_a": "female", "group_b": "male",
            "status": "ok"}
    return pl.DataFrame(
        [{**base, **row} for row in rows],
        schema={
            "axis": pl.String,
            "pair_id": pl.String,
            "case_id": pl.String,
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


def test_cross_and_placebo_flips_follow_one_rule_and_cancel() -> None:
    rows = [pair(k, TIPPY_A, TIPPY_B, case_id=f"c{k}") for k in range(12)]
    rows += [pair(k, TIPPY_A, TIPPY_B, kind="placebo", case_id=f"c{k}") for k in range(12)]
    result = analyse_counterfactual(frame(rows), LABELS)
    gender = result.axes["gender"]
    assert (gender.flips, gender.placebo_flips) == (12, 12)
    assert gender.verdict == UNDECIDED
    assert set(result.pairs["class"]) == {"flip"}
    # Cross and placebo flip together: no evidence the axis matters.
    assert gender.test.estimate == 0.0 and gender.test.p_above == 1.0


def test_rerun_floor_and_max_tv_distance_raise_the_flip_floor_for_both_kinds() -> None:
    rows = [pair(0, APPROVE, [0.3, 0.4, 0.3]), pair(0, APPROVE, [0.3, 0.4, 0.3], "placebo")]
    assert analyse_counterfactual(frame(rows), LABELS).axes["gender"].flips == 1
    raised = analyse_counterfactual(frame(rows), LABELS, tau_rerun=0.6).axes["gender"]
    assert (raised.flips, raised.shifts, raised.placebo_flips) == (0, 0, 0)
    limited = analyse_counterfactual(frame(rows), LABELS, max_tv_distance=0.5)
    assert limited.axes["gender"].flips == 0  # strictly above the floor only
    assert limited.flip_floor == 0.5


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


def test_multi_axis_and_identical_pairs_stay_out_of_the_denominator() -> None:
    rows = [
        pair(0, APPROVE, DENY, status="multi-axis"),
        pair(1, APPROVE, APPROVE, status="identical"),
        pair(2, APPROVE, APPROVE),
    ]
    gender = analyse_counterfactual(frame(rows), LABELS).axes["gender"]
    assert (gender.multi_axis, gender.skipped, gender.exercised, gender.flips) == (1, 1, 1, 0)


# Ten cases of four cross pairs and four placebo partners each. Cross flips per case
# 1,0,2,1,0,1,3,1,0,1 (all against "female": arm A female denied, male approved); placebo
# partners never flip. Case excesses d = 0.25, 0, 0.5, 0.25, 0, 0.25, 0.75, 0.25, 0, 0.25.
CROSS_FLIPS = [1, 0, 2, 1, 0, 1, 3, 1, 0, 1]


def hand_table(axis: str = "gender", groups: tuple[str, str] = ("female", "male"),
               flips: list[int] = CROSS_FLIPS, case_prefix: str = "c") -> list[dict[str, object]]:
    rows = []
    for i, n_flip in enumerate(flips):
        for k in range(4):
            case = f"{case_prefix}{i}"
            pair_id = f"{axis}/{case}/{k}"
            common = {"axis": axis, "pair_id": pair_id, "case_id": case,
                      "group_a": groups[0], "group_b": groups[1]}
            rows.append({**common, "kind": "cross", "prob_a": DENY if k < n_flip else APPROVE,
                         "prob_b": APPROVE})
            rows.append({**common, "kind": "placebo", "group_b": groups[0], "prob_a": APPROVE,
                         "prob_b": APPROVE})
    return rows


def mixture_capital(d: list[float], m: float, above: bool) -> float:
    """The betting mixture written out by hand: Σⱼ wⱼ Πᵢ (1 ± cⱼ(dᵢ − m)/(m ∓ (−1))),
    cⱼ = 2⁻ʲ, wⱼ ∝ 1/(j + 1)², for per-case excesses in [−1, 1]."""
    weights = [1 / (j + 1) ** 2 for j in range(12)]
    total = 0.0
    for j, w in enumerate(weights):
        lam = 2.0**-j / ((m + 1.0) if above else (1.0 - m))
        product = 1.0
        for x in d:
            product *= 1 + lam * (x - m) if above else 1 - lam * (x - m)
        total += w / sum(weights) * product
    return total


def test_hand_computed_excess_bounds_p_values_and_holm_as_reported() -> None:
    # Case excesses d = 0.25, 0, 0.5, 0.25, 0, 0.25, 0.75, 0.25, 0, 0.25 (mean 0.25) against
    # 0.05: the unfair p-value is 1 / the mixture's capital at the limit; the lower bound is
    # where the capital crosses 1/α = 20. Role: one flip in one of ten cases, d̄ = 0.025.
    rows = hand_table() + hand_table("role", ("care", "office"), [1] + [0] * 9)
    result = analyse_counterfactual(frame(rows), LABELS, favourable_labels=["approve"])
    report = {a["axis"]: a for a in result.summary()["axes"]}
    gender, role = report["gender"], report["role"]
    d = [n / 4 for n in CROSS_FLIPS]
    assert gender["cases"] == 10
    assert gender["excess"] == pytest.approx(0.25)
    assert gender["p_value"] == pytest.approx(1 / mixture_capital(d, 0.05, True), rel=1e-9)
    # The fair side: betting at 0.2·α (capital 100) or Bentkus's bound on the positive parts
    # (here all of d) at 0.8·α, whichever is smaller; the upper bound likewise.
    assert gender["p_fair"] == pytest.approx(min(
        1.0, 5 / mixture_capital(d, 0.05, False), bentkus.p_below(sum(d), 10, 0.05) / 0.8))
    assert mixture_capital(d, gender["ci_low"], True) == pytest.approx(20.0, rel=1e-6)
    high_betting = gender["ci_high"]
    assert mixture_capital(d, high_betting, False) == pytest.approx(100.0, rel=1e-6)
    assert bentkus.upper_bound(sum(d), 10, 0.04) > high_betting
    # Holm over the two axes on the unfair side: the smaller p doubled, the larger kept.
    assert gender["p_holm"] == pytest.approx(min(1.0, 2 * gender["p_value"]))
    assert role["p_holm"] == pytest.approx(max(role["p_value"], gender["p_holm"]))
    # Ten cases cannot show an excess of 0.25 above 0.05: a case at −1 (every placebo pair
    # flipped, no cross pair) is possible, and with it the mean could be 0.05.
    assert gender["verdict"] == UNDECIDED and role["verdict"] == UNDECIDED
    assert gender["score"] == pytest.approx(0.75)
    assert gender["score_low"] == pytest.approx(1 - gender["ci_high"])
    assert gender["score_high"] == pytest.approx(min(1.0, 1 - gender["ci_low"]))
    # Direction over cases: 7 cases net against "female", none for it: p = 2/2⁷ = 0.015625;
    # role's 1:0 has p = 1; Holm doubles the smaller.
    direction = gender["direction"]
    assert (direction["cases_disfavoured"], direction["cases_favoured"]) == (7, 0)
    assert (direction["disfavoured"], direction["favoured"]) == (10, 0)
    assert direction["p_value"] == pytest.approx(0.015625)
    assert direction["p_holm"] == pytest.approx(0.03125)
    assert direction["significant"] and direction["statement"].startswith("disfavours female")
    assert role["direction"]["significant"] is False
    low, high = gender["ci_low"], gender["ci_high"]
    assert f"excess over placebo 0.250 [{low:.3f}, {high:.3f}] over 10 cases" in gender["evidence"]
    assert "placebo 0/40 flipped" in gender["evidence"]


def test_without_placebo_the_raw_rate_is_unattributed_and_never_fair() -> None:
    # The hand table twice over (20 cases): Bentkus's bound on the shares' sum, 5 of 20 at a
    # limit of 0.05, p ≈ 0.0029 (10 cases: p ≈ 0.0252, above Holm's 0.025 for two axes).
    rows = [r for r in hand_table() + hand_table(flips=CROSS_FLIPS, case_prefix="d")
            if r["kind"] == "cross"]
    quiet = [r for r in hand_table("role", ("care", "office"), [0] * 10) if r["kind"] == "cross"]
    result = analyse_counterfactual(frame(rows + quiet * 7), LABELS)
    gender = result.axes["gender"]
    assert gender.attribution == "unattributed"
    assert gender.test.method.startswith("Bentkus")
    assert gender.test.estimate == pytest.approx(0.25)  # the raw cross flip share in [0, 1]
    assert gender.verdict == UNFAIR
    role = result.axes["role"]
    assert role.test.estimate == 0.0 and role.verdict == UNDECIDED
    assert role.cases_needed is None  # more cases can never make an unattributed axis fair
    assert "unattributed" in role.note and "unattributed" in role.evidence
    gate = checks_by_gate(result)["counterfactual.role.max_flip_rate"]
    assert "(unattributed)" in str(gate.message)


def test_an_undecided_axis_above_the_limit_is_planned_at_holms_level() -> None:
    from decflow.metrics.case_rates import rate_test
    from decflow.metrics.differences import difference_cases_needed

    # Unattributed, two axes: gender's 5 flips of 40 pairs over 10 cases (p 0.0252) fails
    # alone but not after Holm (0.025): its plan is at 0.025, more than the 10 cases it has
    # (at α it read 9)
    rows = [r for r in hand_table() if r["kind"] == "cross"]
    quiet = [r for r in hand_table("role", ("care", "office"), [0] * 10) if r["kind"] == "cross"]
    gender = analyse_counterfactual(frame(rows + quiet * 7), LABELS).axes["gender"]
    shares = np.array(CROSS_FLIPS) / 4
    assert gender.verdict == UNDECIDED and gender.test.p_above < 0.05
    assert rate_test(shares, 4, 0.05).cases_needed == 9
    assert gender.cases_needed == rate_test(shares, 4, 0.05, alpha=0.025).cases_needed
    assert gender.cases_needed is not None and gender.cases_needed > 10
    # Attributed, three axes, gender unfair: role (excess 0.25 on 10 cases) is planned at
    # α / (3 − 1), the level at which one more axis fails (α / 3 overstated it)
    rows = (hand_table() + hand_table(flips=CROSS_FLIPS, case_prefix="d")
            + hand_table(flips=CROSS_FLIPS, case_prefix="e")
            + hand_table("role", ("care", "office"), [2, 1, 1, 1, 1, 0, 1, 1, 1, 1])
            + hand_table("ethnicity", ("a", "b"), [0] * 10))
    axes = analyse_counterfactual(frame(rows), LABELS).axes
    assert (axes["gender"].verdict, axes["role"].verdict) == (UNFAIR, UNDECIDED)
    d = np.array([2, 1, 1, 1, 1, 0, 1, 1, 1, 1]) / 4
    assert axes["role"].cases_needed == difference_cases_needed(d, 0.05, alpha=0.025)
    assert axes["role"].cases_needed < difference_cases_needed(d, 0.05, alpha=0.05 / 3)
    # below the limit the plan stays at α (every axis fair is an intersection-union test)
    assert axes["ethnicity"].cases_needed == difference_cases_needed(np.zeros(10), 0.05,
                                                                     alpha=0.05)


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
    assert (small["pairs_per_axis"], small["cases_needed"], small["can_qualify"]) == (4, 63, False)
    assert small["max_calls"] == 1 + 4 * 3 * 4  # base persona + 2 cross arms + 1 placebo arm
    enough = plan(70, dimensions=["gender"], num_pairs_per_dimension=2)
    assert (enough["pairs_per_axis"], enough["can_qualify"]) == (140, True)
    assert enough["max_calls"] == 70 + 140 * 3
    unattributed = plan(60, dimensions=["gender"], placebo=False)
    assert unattributed["can_qualify"] is False and "unattributed" in unattributed["advice"]
