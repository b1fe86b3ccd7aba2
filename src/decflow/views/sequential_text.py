"""The text block of a sequential run: calls made against the full suite's, time and money
saved, why it stopped, and per gate the cases used, estimate, time-uniform interval and
e-values."""

from __future__ import annotations

from typing import Any

from decflow.gates.headline import e_value, number


def sequential_block(report: dict[str, Any]) -> list[str]:
    section = report["sequential"]
    made, full = section["calls_made"], section["calls_full"]
    ratio = f" ({number(full / made)}x fewer)" if 0 < made < full else ""
    lines = [
        "",
        f"  Sequential (alpha {number(section['alpha'])}, "
        f"{number(section['alpha_per_gate'])} per gate; seed {section['seed']}, "
        f"batch {section['batch']})",
        f"    cases sent {section['cases_sent']} of {section['suite_cases']}; backend calls "
        f"{made} of {full}{ratio}; stopped: {section['stop_reason']}",
    ]
    saved = [f"{number(section['seconds_saved'])} s"] if section["seconds_saved"] else []
    if section.get("money_saved") is not None:
        saved.append(f"{number(section['money_saved'])} at {number(section['price_per_call'])} "
                     "per call")
    if saved:
        lines.append(f"    saved about {' and '.join(saved)} against the full suite")
    for gate in section["gates"]:
        interval = ("" if gate["low"] is None else
                    f" [{number(gate['low'])}, {number(gate['high'])}]")
        estimate = "n/a" if gate["estimate"] is None else number(gate["estimate"])
        lines.append(
            f"    {gate['gate']:<36} {gate['decision'] or 'undecided':<9} {estimate}{interval}"
            f" after {gate['cases_used']} cases; e {e_value(gate['e_fail'])} (fail) / "
            f"{e_value(gate['e_pass'])} (pass); {gate['stop_reason']}"
            + (f"; zero_limit: {gate['zero_limit']}" if gate.get("zero_limit") else ""))
    return lines
