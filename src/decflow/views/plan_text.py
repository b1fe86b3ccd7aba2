"""The diagnostics plan as text: printed by `--plan`, and to stderr before a run's calls."""

from __future__ import annotations

from typing import Any


def plan_lines(plan: dict[str, Any]) -> list[str]:
    lines = [
        f"plan ({plan['mode']}): {plan['cases']} cases, {plan['calls']} calls: "
        f"{plan['original_calls']} original + {plan['property_calls']} property + "
        f"{plan['diagnostic_calls']} diagnostic"
    ]
    for item in plan["properties"]:
        bound = " (at most)" if item.get("at_most") else ""
        lines.append(f"  {item['property']:<20}{item['calls']:>7} calls{bound}")
    for item in plan["diagnostics"]:
        verdict = "" if "can_decide" not in item else (
            " · enough to decide" if item["can_decide"] else " · NOT enough to decide"
        )
        lines.append(f"  {item['name']:<15}{item['calls']:>7} calls{verdict}")
        lines.append(f"  {'':<15}{item['advice']}")
        if item.get("power"):
            lines.append(f"  {'':<15}{power_line(item['power'])}")
        for axis in item.get("axes", []):
            if axis["not_exercised"]:
                lines.append(f"  {'':<15}{axis['axis']}: not exercised ({axis['not_exercised']})")
                continue
            lines.append(
                f"  {'':<15}{axis['axis']}: {axis['cross_pairs']} cross + "
                f"{axis['placebo_pairs']} placebo pairs over {axis['cases']} cases "
                f"({item['attribution']}; {item['cases_needed']} cases needed for fair)"
            )
    lines.append(f"  {plan['note']}")
    if plan.get("sequential"):
        lines.extend(_sequential_lines(plan["sequential"]))
    return lines


def power_line(curve: list[dict[str, Any]]) -> str:
    """The power curve: cases that show a rate of (1 + k)·limit failing, k = 1, 2, 4."""
    shown = []
    for index, point in enumerate(curve):
        cases = "over a million" if point["cases"] is None else f"{point['cases']}"
        effect = f"limit + {point['effect']}x" if index == 0 else f"+{point['effect']}x"
        shown.append(f"{point['rate']:.3g} ({effect}) in {cases}")
    return ("power 80% (each case all or nothing): shown failing at "
            + ", ".join(shown) + " cases")


def _sequential_lines(plan: dict[str, Any]) -> list[str]:
    failing = plan["cases_if_a_requirement_fails"]
    lines = [
        f"sequential (alpha {plan['alpha']:g}, {plan['alpha_per_gate']:.4g} per gate): about "
        f"{plan['calls_if_all_hold']} of {plan['calls_full']} calls "
        f"({plan['cases_if_all_hold']} of {plan['cases']} cases) if every gate clearly holds"
        + ("" if failing is None else
           f", {plan['calls_if_a_requirement_fails']} calls ({failing} cases) if a rate "
           "requirement clearly fails"),
    ]
    for gate in plan["gates"]:
        fails = ("at the first occurrence" if gate["fails_at"] is None else
                 f"at {gate['fails_at']:.4g}: {_cases(gate['cases_if_fails'])}")
        of = f" ({gate['rates_of']})" if gate.get("rates_of") else ""
        lines.append(f"  {gate['gate']:<36} limit {gate['limit']:g}; holds at "
                     f"{gate['holds_at']:.4g}{of}: {_cases(gate['cases_if_holds'])}; "
                     f"fails {fails}")
    if plan["suite_only"]:
        lines.append("  not planned (the whole suite decides them; ECE its bins): "
                     f"{', '.join(plan['suite_only'])}")
    return lines


def _cases(n: int | None) -> str:
    return "only at the last case" if n is None else f"{n} cases"
