"""What a sequential run should cost: per gate, the cases its evidence needs when the suite
sits clearly on either side of the limit (assumed rates, printed with the plan), and the
run's expected cases and calls. Computed with the run's own e-processes on an evenly
spread sequence of cases at the assumed rate, without any backend call."""

from __future__ import annotations

from typing import Any

from decflow.gates.checks import Check
from decflow.metrics.sequential import RatioGate, cases_to_decide, split_alpha
from decflow.pipeline.contract_run.sequential_calls import GOLDEN_NAMES, PROPERTY_GATES
from decflow.properties.generate import transformed_properties


def assumed_rates(check: Check) -> tuple[float, float]:
    """(clearly holds, clearly fails) for a rate gate: a `max` gate at a fifth of its limit
    and at four times it, a `min` gate a third of the way from 1 and four times as far."""
    limit = check.threshold
    if check.comparison == ">=":
        return 1 - (1 - limit) / 3, max(0.0, 1 - 4 * (1 - limit))
    return limit / 5, min(1.0, 4 * limit)


def sequential_plan(checks: list[Check], cases: int, calls: int,
                    settings: dict[str, Any]) -> dict[str, Any]:
    """Per gate the cases needed at the assumed rates; the run's expected cases when every
    gate clearly holds (the slowest gate) and when one rate requirement clearly fails (the
    fastest; a limit-0 gate fails at its first occurrence, whenever that comes), and the
    calls they make at the suite's `calls` per case."""
    rated = [c for c in checks if c.gate in GOLDEN_NAMES - {"min_macro_f1", "max_ece",
                                                            "max_latency_p95_ms"}
             or (c.gate.partition(".")[0] in transformed_properties()
                 and c.gate.partition(".")[2] in PROPERTY_GATES)]
    bounded = [c for c in checks if c.gate == "max_ece"]  # by its bins: not planned here
    alpha = split_alpha(settings["alpha"], len(rated) + len(bounded))
    gates, passing, failing = [], [], []
    suite_only = [c.gate for c in checks if c not in rated]  # and ECE
    for check in rated:
        if check.threshold == 0 and check.comparison == "<=":
            gate = RatioGate(settings["zero_limit"], "<", cases, binary=True)
            good, bad = 0.0, None
        else:
            gate = RatioGate(check.threshold, check.comparison, cases,
                             binary=check.gate == "max_error_rate")
            good, bad = assumed_rates(check)
        to_pass = cases_to_decide(gate, good, alpha)
        to_fail = 1 if bad is None else cases_to_decide(gate, bad, alpha)
        passing.append(to_pass or cases)
        if check.level == "requirement" and bad is not None:
            failing.append(to_fail or cases)
        gates.append({"gate": check.gate, "limit": check.threshold, "holds_at": good,
                      "cases_if_holds": to_pass, "fails_at": bad, "cases_if_fails": to_fail})
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
