"""What a sequential run should cost: per gate, the cases its evidence needs when the suite
sits clearly on either side of the limit (assumed rates, printed with the plan), and the
run's expected cases and calls. Computed with the run's own e-processes on an evenly
spread sequence of cases at the assumed rate, without any backend call."""

from __future__ import annotations

from typing import Any

from decflow.contracts.gates import GOLDEN_GATES, golden_gate
from decflow.contracts.properties import PROPERTY_GATES
from decflow.gates.checks import Check
from decflow.metrics.case_rates import rate_thresholds
from decflow.metrics.sequential import (
    Planned,
    RatioGate,
    assumed_rates,
    cases_to_decide,
    split_alpha,
)
from decflow.properties.generate import transformed_properties
from decflow.registry import imported


def rate_gate(name: str) -> bool:
    """Whether a sequential run tracks gate `name` as a rate (a golden gate's per-case
    ratio, a property's violation, flip or error rate)."""
    if name in GOLDEN_GATES:
        return golden_gate(name).per_case is not None
    prop, _, gate = name.partition(".")
    return prop in transformed_properties() and gate in PROPERTY_GATES


def planned(check: Check, cases: int, settings: dict[str, Any], labels: int, *,
            rounds_shares: bool = True) -> Planned | None:
    """The planning figure's gate for `check` (None: not planned; `rounds_shares`: the run
    rounds shares, else Bentkus's critical sums)."""
    name, limit = check.gate, check.threshold
    if check.comparison == "<=" and limit == 0:
        return Planned(RatioGate(settings["zero_limit"], "<", cases, binary=True), 0.0, None)
    prop, _, gate = name.partition(".")
    if rate_gate(name):
        good, bad = assumed_rates(limit, check.comparison)
        binary = name in GOLDEN_GATES and golden_gate(name).binary
        return Planned(RatioGate(limit, check.comparison, cases, binary=binary), good, bad)
    plan = golden_gate(name).plan if name in GOLDEN_GATES else None
    if plan is not None:  # a composite, as its gate plans it
        planned_by: Planned = imported(plan)(limit, cases, labels)
        return planned_by
    if name == "stability.verdict":
        # The full run's verdict settled (`SuiteRate`): the suite's flips shown below the
        # full test's holding sum or above its failing one at the suite's size, at α/4 each
        # (planned with several pairs a case: the rounded shares' critical counts, or
        # Bentkus's critical sums for a run without a rounding seed).
        good, bad = assumed_rates(limit, check.comparison)
        sums = rate_thresholds(cases, 2, limit, rounded=rounds_shares)
        return Planned(RatioGate(sums.pass_below / cases, "<=", cases), good, bad, 0.25, 0.25,
                       fail_gate=RatioGate(sums.fail_above / cases, "<=", cases))
    if name == "blindness.max_skew":
        return Planned(RatioGate(limit, "<", cases), max(1 / labels, limit / 2), 1.0,
                       fail_share=1 / labels, of="the most common label's share")
    if prop == "counterfactual" and gate.endswith("max_flip_rate"):
        # Fair needs the excess shown below at α/2 (the other half shows the base
        # decisions not blind).
        return Planned(RatioGate(limit, "<=", cases, floor=-1.0, target="model"), 0.0,
                       min(1.0, 4 * limit), pass_share=0.5, of="the excess over placebo")
    return None


def _tracked_unplanned(name: str) -> bool:
    """A golden gate a sequential run tracks as a composite (its α counted) that the plan
    does not size (the binned ECE, bounded through its bins)."""
    if name not in GOLDEN_GATES:
        return False
    gate = golden_gate(name)
    return gate.composite is not None and gate.plan is None


def sequential_plan(checks: list[Check], cases: int, calls: int,
                    settings: dict[str, Any], labels: int, *,
                    rounds_shares: bool = True) -> dict[str, Any]:
    """Per gate the cases needed at the assumed rates; the run's expected cases when every
    gate clearly holds (the slowest gate) and when one requirement clearly fails (the
    fastest; a limit-0 gate fails at its first occurrence, whenever that comes), and the
    calls they make at the suite's `calls` per case."""
    rated = [(c, p) for c in checks
             if (p := planned(c, cases, settings, labels, rounds_shares=rounds_shares))
             is not None]
    bounded = [c for c in checks if _tracked_unplanned(c.gate)]
    alpha = split_alpha(settings["alpha"], len(rated) + len(bounded))
    gates, passing, failing = [], [], []
    planned_gates = {c.gate for c, _ in rated}
    suite_only = [c.gate for c in checks if c.gate not in planned_gates]  # and ECE
    for check, plan in rated:
        to_pass = cases_to_decide(plan.gate, plan.holds_at, alpha * plan.pass_share)
        to_fail = 1 if plan.fails_at is None else cases_to_decide(
            plan.fail_gate or plan.gate, plan.fails_at, alpha * plan.fail_share)
        passing.append(to_pass or cases)
        if check.level == "requirement" and plan.fails_at is not None:
            failing.append(to_fail or cases)
        gates.append({"gate": check.gate, "limit": check.threshold, "holds_at": plan.holds_at,
                      "cases_if_holds": to_pass, "fails_at": plan.fails_at,
                      "cases_if_fails": to_fail, "rates_of": plan.of})
    batch = settings.get("batch") or 1
    rounded = [min(cases, -(-n // batch) * batch) for n in (*passing, *failing)]
    if_all_hold = cases if suite_only else max(rounded[:len(passing)], default=cases)
    if_one_fails = min(rounded[len(passing):], default=None)
    per_case = calls / cases if cases else 0.0
    return {
        "alpha": settings["alpha"],
        "alpha_per_gate": alpha,
        "gates": gates,
        "suite_only": suite_only,
        "cases_if_all_hold": if_all_hold,
        "cases_if_a_requirement_fails": if_one_fails,
        "cases": cases,
        "calls_full": calls,
        "calls_if_all_hold": round(if_all_hold * per_case),
        "calls_if_a_requirement_fails": (None if if_one_fails is None
                                         else round(if_one_fails * per_case)),
    }
