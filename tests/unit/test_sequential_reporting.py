"""How a sequential run reports what it decided: intervals labelled with their level and
kind (time-uniform, α per gate), a contradicted sequence said in words instead of an
inverted interval, and a limit-0 gate passed at zero_limit with the errored cases it may
not have seen."""

from __future__ import annotations

import numpy as np

from decflow.gates.checks import make_check
from decflow.gates.headline import headline
from decflow.metrics.sequential import RatioGate, contradicted, evaluate, ratio_bounds
from decflow.pipeline.contract_run.qualifiers import zero_limit_qualifier
from decflow.pipeline.contract_run.sequential.gates import (
    Design,
    GateState,
    Tracked,
    limit_zero,
    sequential_checks,
    zero_limit_unseen,
)

# 300 cases all right, then 150 all wrong: an order no shuffle of one suite gives (the
# answers changed during the run); the bettors reject every accuracy.
ORDERED = np.array([1.0] * 300 + [0.0] * 150)


def test_bounds_that_cross_are_kept_crossed_for_the_report() -> None:
    gate = RatioGate(0.85, ">=", 2000)
    ones = np.ones_like(ORDERED)
    low, high = ratio_bounds(gate, ORDERED, ones, 0.0125, nonempty=False)
    assert low > high and contradicted(low, high)
    found = evaluate(gate, ORDERED, ones, 0.0125)
    assert contradicted(found.low, found.high)
    shuffled = np.random.default_rng(0).permutation(ORDERED)
    found = evaluate(gate, shuffled, ones, 0.0125)
    assert found.low is not None and found.high is not None
    assert found.low <= found.estimate <= found.high  # type: ignore[operator]


def test_a_contradicted_sequence_says_so_and_intervals_name_their_level() -> None:
    design = Design(population=2000, alpha=0.05, zero_limit=0.02)
    accuracy = make_check("min_accuracy", "requirement", "accuracy", ">=", 0.85, 0.5)
    ones = np.ones_like(ORDERED)
    contradicted_gate = Tracked(accuracy, ORDERED, ones, RatioGate(0.85, ">=", 2000))
    shuffled = np.random.default_rng(1).permutation(ORDERED)
    plain = Tracked(make_check("min_coverage", "requirement", "coverage", ">=", 0.5, 0.6),
                    shuffled, ones, RatioGate(0.5, ">=", 2000))
    states = {"min_accuracy": GateState(), "min_coverage": GateState("pass", "evidence", 40)}
    checks, rows = sequential_checks([contradicted_gate, plain], states, len(ORDERED), design)
    # two evidence gates: α 0.025 each, so each side of the bounds holds at 97.5 %
    assert checks[0].message == (
        "accuracy 0.6667 >= 0.85; not established: about 50 cases needed (contradicted: no "
        "value within the time-uniform, 97.5% per side bounds, n=450)")
    assert checks[0].evidence is not None
    assert checks[0].evidence.low is checks[0].evidence.high is None
    assert rows[0]["contradicted"] is True and rows[0]["low"] is None
    assert "(time-uniform, 97.5% per side, n=450)" in checks[1].message
    assert rows[1]["interval"] == "time-uniform, 97.5% per side"
    assert "95% per side" not in checks[1].message
    assert headline("warn", checks).startswith(
        "WARN 1/2: min_accuracy not established")
    failed = checks[0].__class__(**{**checks[0].__dict__, "status": "fail"})
    assert headline("fail", [failed]) == "FAIL 1/1: min_accuracy 0.6667 (contradicted) < 0.85"


def test_zero_limit_passes_name_the_cases_they_may_not_have_seen() -> None:
    """The issue's suite: 2,000 cases, zero_limit 0.02, stopped after 248 with no error:
    the pass shows fewer than 40 errored cases in the suite, so up to 39 unseen."""
    design = Design(population=2000, alpha=0.05, zero_limit=0.02)
    errors = make_check("max_error_rate", "requirement", "error_rate", "<=", 0.0, 0.0)
    flips = make_check("option_order.max_flip_rate", "requirement", "option_order.flip_rate",
                       "<=", 0.0, 0.0)
    none = np.zeros(248, dtype=bool)
    passed = GateState("pass", "evidence", 248)
    tracked = [limit_zero(errors, none, design), limit_zero(flips, none, design)]
    assert zero_limit_unseen(tracked[0], passed, 248, design) == (
        "judged at 0.02, 0 of 248 sent; up to 39 errored cases unseen")
    assert zero_limit_unseen(tracked[1], passed, 248, design) == (
        "judged at 0.02, 0 of 248 sent; up to 39 cases with a flip unseen")
    # a count over every case, or a failure at the first occurrence: no zero_limit
    assert zero_limit_unseen(tracked[0], GateState("pass", "suite", 2000), 2000, design) is None
    assert zero_limit_unseen(tracked[0], GateState("fail", "certain", 9), 248, design) is None
    # ten cases left: at most ten unseen
    assert zero_limit_unseen(tracked[0], GateState("pass", "certain", 1990), 1990, design) == (
        "judged at 0.02, 0 of 1990 sent; up to 10 errored cases unseen")
    checks, rows = sequential_checks(tracked, {"max_error_rate": passed,
                                               "option_order.max_flip_rate": passed}, 248,
                                     design)
    assert checks[0].message == ("error_rate 0 <= 0 (zero_limit: judged at 0.02, 0 of 248 "
                                 "sent; up to 39 errored cases unseen)")
    assert checks[0].evidence is not None and "zero_limit" in checks[0].evidence.notes
    qualifier = zero_limit_qualifier(rows)
    assert str(qualifier) == (
        "(zero_limit: max_error_rate judged at 0.02, 0 of 248 sent; up to 39 errored cases "
        "unseen; option_order.max_flip_rate judged at 0.02, 0 of 248 sent; up to 39 cases "
        "with a flip unseen)")
    assert zero_limit_qualifier(rows[:1]) is not None
    assert zero_limit_qualifier([{**rows[0], "zero_limit": None}]) is None
