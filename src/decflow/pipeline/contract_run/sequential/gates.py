"""The gates of a sequential run as ratios of per-case sums, and their verdicts so far.

Every check the full run would make is tracked: golden gates and property rates as
`RatioGate`s over the cases sent (in the order sent), limit-0 gates as the share of cases
with an occurrence against `sequential.zero_limit`, macro-F1, ECE and the latency p95 as
composites of such gates (`decflow.metrics.sequential_composite`), the diagnostics as built
by `sequential.diagnostics`, and what no evidence can decide early (a property that
transformed nothing) as gates only the whole suite decides. The driver (`sequential.calls`)
and the summary both call `advance` at every batch boundary, so a re-built report
reproduces the run's verdicts; decisions are final once made.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from decflow.contracts.gates import golden_gate
from decflow.gates.checks import PER_SIDE, Check, evidence_check
from decflow.gates.headline import number
from decflow.metrics.evidence import CONTRADICTED, ZERO_LIMIT, Evidence
from decflow.metrics.golden_cases import CaseValues
from decflow.metrics.sequential import (
    RatioGate,
    cases_to_decide,
    contradicted,
    evaluate,
    interval_label,
    split_alpha,
)
from decflow.metrics.sequential_composite import (
    MODEL_PROMISE,
    SUITE_PROMISE,
    Composite,
)
from decflow.pipeline.contract_run.golden_section import golden_arrays
from decflow.pipeline.contract_run.transformed import judged
from decflow.registry import imported

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

SUITE_ONLY = "decided over the whole suite only"


@dataclass(frozen=True)
class Design:
    """What a sequential run fixes before its first call."""

    population: int  # cases in the suite
    alpha: float
    zero_limit: float
    variants: Mapping[str, int] = field(default_factory=dict)  # property → most per case
    # Cases whose input repeats an earlier case's (blindness counts each input once).
    repeated: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"population": self.population, "alpha": self.alpha,
                "zero_limit": self.zero_limit, "variants": dict(self.variants),
                "repeated": list(self.repeated)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Design:
        return cls(int(data["population"]), float(data["alpha"]), float(data["zero_limit"]),
                   dict(data.get("variants") or {}), tuple(data.get("repeated") or ()))


@dataclass(frozen=True)
class Tracked:
    """One check of the run and the per-case values (in the order sent) it is a ratio of,
    or the `composite` that judges it; neither: only the whole suite decides it."""

    check: Check
    num: np.ndarray
    den: np.ndarray
    ratio: RatioGate | None
    zero: bool = False
    composite: Composite | None = None

    @property
    def has_evidence(self) -> bool:
        """Decided by evidence before the last case (else only by the whole suite)."""
        return self.ratio is not None or self.composite is not None


@dataclass(frozen=True)
class GateState:
    """A tracked gate's standing: the final decision (if any), where it was made, and the
    last e-values."""

    decision: str | None = None  # "pass" | "fail" | "not_established"
    reason: str | None = None  # "evidence" | "certain" | "suite"
    decided_at: int | None = None
    log_e_fail: float = 0.0
    log_e_pass: float = 0.0
    looked_at: int = 0  # a costly composite: cases at its last look (see `_look`)


def _ratio(check: Check, population: int, *, top: float = 1.0, den_max: float = 1.0,
           binary: bool = False) -> RatioGate:
    return RatioGate(check.threshold, check.comparison, population, top, den_max, binary)


def golden_tracked(contract: Contract, table: pl.DataFrame, checks: Sequence[Check],
                   design: Design) -> list[Tracked]:
    """The golden checks with their per-case values, as the gate registry says each is
    tracked (a per-case ratio, or a composite); `table` holds the sent cases joined with
    their original's result, in the order sent."""
    labels = tuple(contract.decision.labels)
    evaluation = contract.evaluation
    values = CaseValues.of(golden_arrays(table, labels), len(labels),
                           evaluation.confidence_threshold, evaluation.calibration_bins)
    ones = values.everyone
    n = design.population
    out = []
    for check in checks:
        gate = golden_gate(check.gate)
        if gate.composite is not None:
            composite = imported(gate.composite)(values, check.threshold, n)
            out.append(Tracked(check, ones, ones, None, composite=composite))
            continue
        if gate.per_case is None:
            out.extend(suite_only([check], len(ones)))
            continue
        num, den, top = imported(gate.per_case)(values)
        num_f, den_f = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
        if check.threshold == 0 and check.comparison == "<=":
            out.append(limit_zero(check, num_f > 0, design))
        else:
            out.append(Tracked(check, num_f, den_f,
                               _ratio(check, n, top=float(top), binary=gate.binary)))
    return out


def suite_only(checks: Sequence[Check], size: int) -> list[Tracked]:
    """Checks that only the whole suite decides (a property that transformed nothing)."""
    ones = np.ones(size)
    return [Tracked(check, ones, ones, None) for check in checks]


def limit_zero(check: Check, occurred: np.ndarray, design: Design) -> Tracked:
    """A limit-0 gate: the share of cases with an occurrence, against `zero_limit`."""
    gate = RatioGate(design.zero_limit, "<", design.population, binary=True)
    ones = np.ones(len(occurred))
    return Tracked(check, occurred.astype(np.float64), ones, gate, zero=True)


def property_tracked(contract: Contract, checks: Sequence[Check], order: Sequence[str],
                     transformed: pl.DataFrame, comparisons: pl.DataFrame,
                     design: Design) -> list[Tracked]:
    """The property checks with per-case counts: `transformed` holds (case_id, property,
    error_kind) of every transformed request of the sent cases, `comparisons` the evaluated
    ones; `order` the sent case ids."""
    position = {case: i for i, case in enumerate(order)}
    size = len(order)
    configs = dict(contract.properties.enabled())

    def per_case(case_ids: pl.Series, weights: np.ndarray | None = None) -> np.ndarray:
        index = np.fromiter((position[c] for c in case_ids), dtype=np.int64,
                            count=len(case_ids))
        return np.bincount(index, weights=weights, minlength=size).astype(np.float64)

    out = []
    for check in checks:
        prop, _, gate = check.gate.partition(".")
        if prop not in design.variants:
            # Nothing of the suite was transformed: the full run fails it as not exercised.
            out.extend(suite_only([check], size))
            continue
        rows = transformed.filter(pl.col("property") == prop)
        if gate == "max_error_rate":
            errors = rows.filter(pl.col("error_kind").is_not_null())["case_id"]
            out.append(limit_zero(check, per_case(errors) > 0, design))
            continue
        evaluated = comparisons.filter(pl.col("property") == prop)
        config = configs.get(prop)
        if config is None or not evaluated.height:
            counted = per_case(evaluated["case_id"]) if evaluated.height else np.zeros(size)
            out.append(Tracked(check, np.zeros(size), counted,
                               _ratio(check, design.population,
                                      den_max=float(design.variants.get(prop, 1)))))
            continue
        found, verdict = judged(contract, prop, config, evaluated)
        hits = verdict.limit_violated if gate == "max_violation_rate" else found.flipped
        num = per_case(evaluated["case_id"], np.asarray(hits, dtype=np.float64))
        den = per_case(evaluated["case_id"])
        if check.threshold == 0:
            out.append(limit_zero(check, num > 0, design))
        else:
            out.append(Tracked(check, num, den, _ratio(
                check, design.population, den_max=float(design.variants.get(prop, 1)))))
    return out


def advance(states: Mapping[str, GateState], tracked: Sequence[Tracked], sent: int,
            design: Design) -> dict[str, GateState]:
    """Every tracked gate's state after the first `sent` cases (a batch boundary); a gate
    decided earlier keeps its decision."""
    alpha = gate_alpha(tracked, design)
    complete = sent >= design.population
    out = {}
    for item in tracked:
        name = item.check.gate
        state = states.get(name, GateState())
        if state.decision is not None:
            out[name] = state
            continue
        if complete:
            verdict = {"pass": "pass", "not_established": "not_established"}.get(
                item.check.status, "fail")
            out[name] = GateState(verdict, "suite", sent, state.log_e_fail, state.log_e_pass)
            continue
        if item.composite is not None:
            out[name] = _look(item.composite, state, sent, alpha)
            continue
        if item.ratio is None:
            out[name] = state
            continue
        num, den = item.num[:sent], item.den[:sent]
        if item.zero and num.any():
            out[name] = GateState("fail", "certain", sent, math.inf, state.log_e_pass)
            continue
        found = evaluate(item.ratio, num, den, alpha, interval=False)
        if found.decision == "fail" and item.zero:
            found = replace(found, decision=None, reason=None)
        out[name] = GateState(found.decision, found.reason,
                              sent if found.decision else None,
                              found.log_e_fail, found.log_e_pass)
    return out


def _look(composite: Composite, state: GateState, sent: int, alpha: float) -> GateState:
    """A composite's state after `sent` cases. Bounds that cost a bisection per label or
    bin are looked at when the cases grew by a tenth (fewer looks keep the guarantee)."""
    if composite.costly and sent < max(1.1 * state.looked_at, 1):
        return state
    found = composite.evidence(sent, alpha, interval=False)
    return GateState(found.decision, found.reason, sent if found.decision else None,
                     found.log_e_fail, found.log_e_pass, looked_at=sent)


def gate_alpha(tracked: Sequence[Tracked], design: Design) -> float:
    """Each evidence gate's share of the run's α."""
    return split_alpha(design.alpha, sum(1 for t in tracked if t.has_evidence))


def settled(states: Mapping[str, GateState], tracked: Sequence[Tracked]) -> str | None:
    """Why the run can stop (None: it cannot yet): every gate decided, or a requirement
    shown to fail, or every requirement shown to hold and a warning shown to fail."""
    decisions = {t.check.gate: (t.check.level, states.get(t.check.gate, GateState()).decision)
                 for t in tracked}
    failed = [g for g, (level, d) in decisions.items() if level == "requirement" and d == "fail"]
    if failed:
        return f"requirement {failed[0]} shown to fail"
    if all(d is not None for _, d in decisions.values()):
        return "every gate decided"
    requirements = [d for level, d in decisions.values() if level == "requirement"]
    warned = [g for g, (level, d) in decisions.items() if level == "warning" and d == "fail"]
    if warned and all(d == "pass" for d in requirements):
        return f"every requirement holds and warning {warned[0]} shown to fail"
    return None


def sequential_checks(tracked: Sequence[Tracked], states: Mapping[str, GateState],
                      sent: int, design: Design) -> tuple[list[Check], list[dict[str, Any]]]:
    """(checks, per-gate report rows) at the stop: a decided gate gets its decision with the
    time-uniform interval, an undecided one is not established."""
    alpha = gate_alpha(tracked, design)
    label = interval_label(alpha)
    checks, rows = [], []
    for item in tracked:
        check = item.check
        state = states.get(check.gate, GateState())
        low = high = estimate = None
        method = SUITE_ONLY
        if item.ratio is not None and sent:
            found = evaluate(item.ratio, item.num[:sent], item.den[:sent], alpha)
            estimate, low, high = found.estimate, found.low, found.high
            method = ("hypergeometric confidence sequence, without replacement"
                      if item.ratio.binary else
                      "betting confidence sequence, the model's rate (no finite-suite "
                      "correction)" if item.ratio.target == "model" else
                      "betting confidence sequence, without replacement")
        elif item.composite is not None and sent:
            found = item.composite.evidence(sent, alpha, interval=True)
            estimate, low, high = found.estimate, found.low, found.high
            method = item.composite.method
        notes: tuple[str, ...] = ("sequential",)
        promise = item.composite.promise if item.composite is not None else SUITE_PROMISE
        if promise == MODEL_PROMISE:
            notes += (promise,)
        crossed = contradicted(low, high)
        if crossed:
            # No value survives the bounds: say so, never print an inverted interval.
            low = high = None
            notes += (CONTRADICTED,)
        shown = label if low is not None else None
        unseen = zero_limit_unseen(item, state, sent, design)
        if item.zero:
            notes += (f"limit 0 judged as the share of cases with an occurrence against "
                      f"sequential.zero_limit {design.zero_limit:g}",)
        if unseen is not None:
            notes += (ZERO_LIMIT,)
        if state.reason == "suite":
            verdict = {"pass": "holds", "not_established": "not_established"}.get(
                check.status, "fails")
            final = check.evidence or Evidence(
                method="exact over the whole suite", n=sent,
                verdict=verdict,  # type: ignore[arg-type]
                estimate=check.value, notes=notes)
            checks.append(replace(check, evidence=final))
            # The whole suite decides the gate as the full run does: show its evidence, not
            # the time-uniform interval, which is wider and may straddle the limit.
            estimate, low, high, method = final.estimate, final.low, final.high, final.method
            shown, crossed = (PER_SIDE if low is not None else None), False
        else:
            verdict = {"pass": "holds", "fail": "fails"}.get(state.decision or "",
                                                             "not_established")
            if not item.has_evidence and state.decision is None:
                notes += (SUITE_ONLY,)
            needed = None
            if state.decision is None and item.ratio is not None and estimate is not None:
                needed = cases_to_decide(item.ratio, min(max(estimate, 0.0), 1.0), alpha)
                needed = item.ratio.population if needed is None else needed
            evidence = Evidence(method=method, n=sent, verdict=verdict,  # type: ignore[arg-type]
                                estimate=estimate, low=low, high=high, cases_needed=needed,
                                notes=notes)
            judged_check = evidence_check(
                check.gate, check.level, check.metric, check.comparison, check.threshold,
                evidence, bounds=label,
                suffix=f" ({CONTRADICTED}: no value within the {label} bounds, n={sent})"
                if crossed else "")
            if unseen is not None:
                # A pass at zero_limit is no count of 0 over the suite: the line says so.
                judged_check = replace(judged_check, message=(
                    f"{check.metric} {number(estimate)} {check.comparison} "
                    f"{check.threshold:g} ({ZERO_LIMIT}: {unseen})"))
            checks.append(judged_check)
        rows.append({
            "gate": check.gate,
            "level": check.level,
            "decision": state.decision,
            "stop_reason": _reason_text(state),
            "cases_used": state.decided_at if state.decided_at is not None else sent,
            "estimate": estimate,
            "low": low,
            "high": high,
            "interval": shown,
            **({CONTRADICTED: True} if crossed else {}),
            "e_fail": _e_value(state.log_e_fail),
            "e_pass": _e_value(state.log_e_pass),
            "method": method,
            "promise": "model" if promise == MODEL_PROMISE else "full run",
            **({ZERO_LIMIT: unseen} if unseen is not None else {}),
        })
    return checks, rows


# What a limit-0 gate counts, by the gate's last name part.
OCCURRENCES = {"max_error_rate": "errored cases", "max_flip_rate": "cases with a flip",
               "max_violation_rate": "cases with a violation"}


def occurrence(gate: str) -> str:
    """What a limit-0 gate counts: `errored cases`, `cases with a flip`, …"""
    return OCCURRENCES.get(gate.rpartition(".")[2], "cases with an occurrence")


def zero_limit_unseen(item: Tracked, state: GateState, sent: int, design: Design) -> str | None:
    """For a limit-0 gate passed at `sequential.zero_limit` before the suite's end (its
    unsent cases may hold occurrences): ``judged at 0.02, 0 of 248 sent; up to 39 errored
    cases unseen`` — the pass shows the suite's share below zero_limit, so at most
    ⌈zero_limit·N⌉ − 1 such cases among those not sent. None for any other gate."""
    if not item.zero or state.decision != "pass" or state.reason == "suite" \
            or sent >= design.population:
        return None
    most = min(max(math.ceil(design.zero_limit * design.population) - 1, 0),
               design.population - sent)
    return (f"judged at {design.zero_limit:g}, 0 of {sent} sent; up to {most} "
            f"{occurrence(item.check.gate)} unseen")


def _reason_text(state: GateState) -> str:
    return {
        "evidence": "e-value reached 1/alpha",
        "certain": "the unseen cases cannot change it",
        "suite": "every case of the suite sent",
    }.get(state.reason or "", "not decided when the run stopped")


E_SHOWN_MAX = 1e15  # e-values beyond this (or infinite: a certain verdict) are shown as it


def _e_value(log_e: float) -> float:
    return E_SHOWN_MAX if log_e >= math.log(E_SHOWN_MAX) else float(math.exp(log_e))
