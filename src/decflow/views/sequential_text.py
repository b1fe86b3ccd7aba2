"""The text block of a sequential run: calls made against the full suite's, time and money
saved, why it stopped, and per gate the cases used, estimate, time-uniform interval and
e-values."""

from __future__ import annotations

from decflow.gates.headline import e_value, number
from decflow.report.run_report import RunView, Sequential, SequentialGate


def sequential_block(report: RunView) -> list[str]:
    section = report.sequential
    if section is None:
        return []
    made, full = section.calls_made, section.calls_full
    ratio = f" ({number(full / made)}x fewer)" if 0 < made < full else ""
    lines = [
        "",
        f"  Sequential (alpha {number(section.alpha)}, "
        f"{number(section.alpha_per_gate)} per gate; seed {section.seed}{seed_from(section)}, "
        f"batch {section.batch}; intervals {time_uniform(section)})",
        f"    cases sent {section.cases_sent} of {section.suite_cases}; backend calls "
        f"{made} of {full}{ratio}{from_cache(section)}; stopped: {section.stop_reason}",
    ]
    saved = [f"{number(section.seconds_saved)} s"] if section.seconds_saved else []
    if section.money_saved is not None:
        saved.append(f"{number(section.money_saved)} at {number(section.price_per_call)} "
                     "per call")
    if saved:
        lines.append(f"    saved about {' and '.join(saved)} against the full suite")
    for gate in section.gates:
        interval = gate_interval(gate, section)
        estimate = "n/a" if gate.estimate is None else number(gate.estimate)
        lines.append(
            f"    {gate.gate:<36} {gate.decision or 'undecided':<9} {estimate}{interval}"
            f" after {gate.cases_used} cases; e {e_value(gate.e_fail)} (fail) / "
            f"{e_value(gate.e_pass)} (pass); {gate.stop_reason}"
            + (f"; zero_limit: {gate.zero_limit}" if gate.zero_limit else "")
            + ("; about the model" if gate.promise == "model" else ""))
    if any(gate.promise == "model" for gate in section.gates):
        lines.append("    gates marked 'about the model' are verdicts about the model's rate, "
                     "wrong with probability at most the alpha per gate; they need not be "
                     "the full run's status")
    return lines


def from_cache(section: Sequential) -> str:
    """` (+ 12 answers from the call cache)` when the cache served some."""
    served = section.calls_from_cache
    return f" (+ {served} answers from the call cache)" if served else ""


def time_uniform(section: Sequential) -> str:
    """What a sequential run's intervals are: ``time-uniform, 98.75% per side``."""
    # the sequential statistics load only for a sequential run's report
    from decflow.metrics.sequential import interval_label

    return interval_label(float(section.alpha_per_gate))


def gate_interval(gate: SequentialGate, section: Sequential) -> str:
    """A gate row's interval: `` [low, high]``, labelled when it is not the run's
    time-uniform one (a gate the whole suite decided shows the full run's); a contradicted
    sequence says so (decflow/3 rows carry no label)."""
    if gate.contradicted:
        return " contradicted (no value within the bounds)"
    if gate.low is None:
        return ""
    kind = gate.interval
    label = f" ({kind})" if kind and kind != time_uniform(section) else ""
    return f" [{number(gate.low)}, {number(gate.high)}]{label}"


def seed_from(section: Sequential) -> str:
    """Why a repeated run took the same order: its seed was derived, not drawn."""
    if section.seed_from is None:
        return ""
    return f" (from the {section.seed_from}: the call cache is on)"
