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
    return lines
