"""The diagnostics of a sequential run as gates decided batch by batch.

- `stability.verdict`: each complete case's share of flipped rerun pairs (the meter's own
  pairing, `rerun_pairs`), rounded to 0/1 with the run's uniforms as the full run rounds it.
  The full run's verdict is `rate_test` on those shares, a function of their sum, so the
  sequential run settles it (`SuiteRate`): stochastic (FAIL at its level) once the suite's
  sum is shown above the full test's failing sum at the suite's size, deterministic (PASS)
  once shown below its holding sum, not established once shown between them — the full run's
  status with probability ≥ 1 − α_g, also where the rate sits between ε and where the full
  test decides (under the run's rounding seed: a full run with another seed may round
  fractional shares otherwise).
- `blindness.max_skew`: the originals' labels as a `ModalShare` of the suite, each input
  counted once (its first case in suite order, as the full run counts it).
- `counterfactual.<axis>.max_flip_rate`: each case's excess (cross minus placebo flip share,
  `case_differences`) against `max_flip_rate`, a verdict about the model's excess
  (`RatioGate(target="model")`: the cases are i.i.d. draws of the model in any order), wrong
  with probability ≤ α_g — the weaker promise: not necessarily the full run's status, whose
  test (`metrics.differences`, Holm on the unfair side) is not a function of a few sums the
  run could settle (MODEL_PROMISE, stated in the report). FAIL
  once the bettor against "excess ≤ limit" reaches 1/α_g; PASS (fair) only with a placebo
  and with the base-persona decisions shown not blind, the bettor against "excess ≥ limit"
  at α_g/2 and the base decisions' `ModalShare` at α_g/2; shown below but blind, or without
  a placebo (the raw cross share), a final *not established*. Every axis is a gate of the
  run's Bonferroni split, which stands in for the full run's Holm on each side.
- `counterfactual.<axis>.max_error_rate`: limit 0, the share of cases with an errored pair
  against `zero_limit`, like every limit-0 gate.

A persona flip must clear the rerun noise floor (the meter's TV p95). The full run measures
it over every case; a sequential run over the cases sent by the end of each batch, and
judges that batch's pairs with the floor known then, so a case's excess never changes once
judged: the bettors see one sequence, the driver and the summary the same one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import polars as pl

from decflow.diagnostics.blindness import DEFAULT_THRESHOLD
from decflow.diagnostics.counterfactual import (
    attach_probabilities,
    case_differences,
    classify_pairs,
)
from decflow.diagnostics.pair_storage import BASE, SKIPPED
from decflow.diagnostics.stability import ROUNDED_AS, rerun_pairs
from decflow.gates.checks import Check
from decflow.metrics.case_rates import rate_thresholds
from decflow.metrics.rounded_shares import uniforms
from decflow.metrics.sequential import Decision, GateEvidence, RatioGate, evaluate
from decflow.metrics.sequential_composite import MODEL_PROMISE, ModalShare, SuiteRate
from decflow.pipeline.contract_run.derive import arm_fingerprint, counterfactual_config
from decflow.pipeline.contract_run.diagnostic_rows import DiagnosticRows
from decflow.pipeline.contract_run.diagnostics_section import meter_input
from decflow.pipeline.contract_run.sequential.gates import Design, Tracked, limit_zero, suite_only
from decflow.pipeline.spec import RunSpec

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

Floats = np.ndarray


@dataclass(frozen=True)
class DiagnosticInputs:
    """What the diagnostic gates read: the sent cases' diagnostic requests with their
    results, the suite's stored persona pair table (`pair_storage.pair_table`; None without
    personas) and the batch bounds so far."""

    rows: DiagnosticRows
    pairs: pl.DataFrame | None
    bounds: Sequence[int]


@dataclass(frozen=True, eq=False)
class PersonaAxis:
    """A persona axis's flip gate: the per-case excess (or, without a placebo, the raw cross
    flip share) for the model, and the base-persona decisions that must be shown not blind
    before the axis is fair."""

    excess: RatioGate
    values: Floats
    counted: Floats
    attributed: bool
    base: ModalShare
    method: ClassVar[str] = ("betting confidence sequence on the per-case excess over "
                             "placebo (the model's rate)")
    costly: ClassVar[bool] = False
    promise: ClassVar[str] = MODEL_PROMISE

    def evidence(self, sent: int, alpha: float, *, interval: bool) -> GateEvidence:
        found = evaluate(self.excess, self.values[:sent], self.counted[:sent], alpha,
                         interval=interval)
        decision: Decision | None = None
        if found.log_e_fail >= math.log(1.0 / alpha):
            decision = "fail"
        elif not self.attributed:
            # Unattributed: a low raw rate can never make the axis fair.
            if found.log_e_pass >= math.log(1.0 / alpha):
                decision = "not_established"
        elif found.log_e_pass >= math.log(2.0 / alpha):
            # Shown blind, the base decisions make the axis a final not established.
            blind = self.base.evidence(sent, alpha / 2, interval=False).decision
            decision = "pass" if blind == "pass" else (
                "not_established" if blind == "fail" else None)
        return GateEvidence(sent, found.estimate, found.low, found.high, found.log_e_fail,
                            found.log_e_pass, decision, "evidence" if decision else None)


def repeated_inputs(cases: pl.DataFrame) -> tuple[str, ...]:
    """Case ids whose input repeats an earlier case's in suite order: blindness counts each
    input once, at its first case."""
    keys = cases.select(pl.struct("input_text", "input_json").is_first_distinct())
    return tuple(cases["case_id"].filter(~keys.to_series()).cast(pl.String).to_list())


def _positions(order: Sequence[str]) -> dict[str, int]:
    return {case: i for i, case in enumerate(order)}


def _label_index(labels: Sequence[str], selected: Sequence[str | None]) -> np.ndarray:
    index = {label: i for i, label in enumerate(labels)}
    return np.array([index.get(s, -1) if s is not None else -1 for s in selected],
                    dtype=np.int64)


def stability_gate(epsilon: float, population: int, values: Floats, counted: Floats,
                   most_pairs: int, *, rounded: bool = False) -> SuiteRate:
    """`stability.verdict` as the full run's verdict settled from the cases sent: each
    complete case's share of flipped rerun pairs (`rounded` to 0/1 with the run's uniforms,
    as the full run rounds them), against `rate_test`'s critical sums at the suite's size
    (`most_pairs`: the most pairs a case has, which picks the full test)."""
    return SuiteRate(rate_thresholds(population, most_pairs, epsilon, rounded=rounded),
                     population, values, counted, binary=most_pairs <= 1 or rounded)


def _stability(check: Check, rows: DiagnosticRows, order: Sequence[str],
               design: Design, rounding_seed: int | None) -> Tracked:
    series = meter_input(rows)
    num, den = np.zeros(len(order)), np.zeros(len(order))
    most = 0
    if series is not None:
        pairs = rerun_pairs(series).group_by("case_id").agg(
            pl.col("flipped").mean().alias("share"), pl.len().alias("pairs"))
        if rounding_seed is not None:  # each share as the full run rounds it
            draws = uniforms(rounding_seed, ROUNDED_AS, pairs["case_id"].to_list())
            pairs = pairs.with_columns((pl.Series(draws) < pl.col("share"))
                                       .cast(pl.Float64).alias("share"))
        where = _positions(order)
        for case, share, count in pairs.iter_rows():
            num[where[case]], den[where[case]] = share, 1.0
            most = max(most, int(count))
    ones = np.ones(len(order))
    return Tracked(check, ones, ones, None, composite=stability_gate(
        check.threshold, design.population, num, den, most,
        rounded=rounding_seed is not None))


def _blindness(check: Check, labels: Sequence[str], rows: DiagnosticRows,
               order: Sequence[str], design: Design) -> Tracked:
    originals = rows.originals.filter(pl.col("error_kind").is_null())
    repeated = set(design.repeated)
    label_of = np.full(len(order), -1, dtype=np.int64)
    where = _positions(order)
    for case, index in zip(originals["case_id"].to_list(),
                           _label_index(labels, originals["selected"].to_list()), strict=True):
        if case not in repeated:
            label_of[where[case]] = index
    ones = np.ones(len(order))
    return Tracked(check, ones, ones, None, composite=ModalShare(
        check.threshold, len(labels), design.population, label_of))


def _floors(rows: DiagnosticRows, order: Sequence[str], bounds: Sequence[int],
            at_least: float) -> np.ndarray:
    """Per case (in `order`), the flip floor its batch was judged with: the rerun TV p95 of
    the cases sent by the batch's end (when the run has rerun evidence), at least
    `at_least`."""
    floors = np.full(len(order), at_least)
    series = meter_input(rows)
    if series is None:
        return floors
    pairs = rerun_pairs(series).drop_nulls("tv")
    where = _positions(order)
    position = np.array([where[c] for c in pairs["case_id"].to_list()], dtype=np.int64)
    tv = pairs["tv"].to_numpy()
    start = 0
    for bound in bounds:
        seen = tv[position < bound]
        if seen.size:
            floors[start:bound] = max(at_least, float(np.percentile(seen, 95)))
        start = bound
    return floors


def _classified(contract: Contract, rows: DiagnosticRows, pairs: pl.DataFrame,
                order: Sequence[str], floors: np.ndarray) -> pl.DataFrame:
    """The sent cases' pairs, classified batch by batch with each case's floor."""
    frame = pairs.filter(pl.col("case_id").is_in(list(order)))
    probabilities = {
        arm_fingerprint(rid): None if kind is not None else probs
        for rid, probs, kind in zip(rows.arms["request_id"], rows.arms["probabilities"],
                                    rows.arms["error_kind"], strict=True)
    }
    frame = attach_probabilities(frame, probabilities)
    where = _positions(order)
    floor_of = pl.Series("floor", [float(floors[where[c]]) for c in frame["case_id"]])
    labels = tuple(contract.decision.labels)
    parts = [classify_pairs(part.drop("floor"), labels, flip_floor=floor)
             for (floor,), part in frame.with_columns(floor_of).group_by(
                 "floor", maintain_order=True)]
    return pl.concat(parts) if parts else classify_pairs(frame, labels)


def _base_labels(contract: Contract, rows: DiagnosticRows, bases: pl.DataFrame,
                 order: Sequence[str]) -> np.ndarray:
    """Per sent case, the label its base persona was given (−1: errored, none, or an input
    an earlier case of the suite already had); `bases` holds the suite's base rows of the
    pair table, in suite order."""
    selected = {arm_fingerprint(rid): (label if kind is None else None)
                for rid, label, kind in zip(rows.arms["request_id"], rows.arms["selected"],
                                            rows.arms["error_kind"], strict=True)}
    first = bases.filter(pl.col("fingerprint_a").is_first_distinct())
    out = np.full(len(order), -1, dtype=np.int64)
    where = _positions(order)
    labels = tuple(contract.decision.labels)
    for case, fingerprint in first.select("case_id", "fingerprint_a").iter_rows():
        if case in where:
            out[where[case]] = _label_index(labels, [selected.get(fingerprint)])[0]
    return out


def _persona(contract: Contract, spec: RunSpec, checks: Sequence[Check],
             inputs: DiagnosticInputs, order: Sequence[str], design: Design) -> list[Tracked]:
    config = counterfactual_config(spec, contract)
    pairs = inputs.pairs
    if config is None or pairs is None:
        return suite_only(checks, len(order))
    attributed = config.placebo and config.persona_pairs is None
    floors = _floors(inputs.rows, order, inputs.bounds, config.max_tv_distance or 0.0)
    kind = pl.col("kind")
    frame = pairs.filter(~kind.is_in([BASE, SKIPPED]))
    table = _classified(contract, inputs.rows, frame, order, floors)
    blindness = contract.diagnostics.blindness if contract.diagnostics is not None else None
    base = ModalShare(blindness.threshold if blindness is not None else DEFAULT_THRESHOLD,
                      len(contract.decision.labels), design.population,
                      _base_labels(contract, inputs.rows, pairs.filter(kind == BASE), order))
    statuses = frame.group_by("axis").agg(pl.col("status"))
    built = {axis: set(status) for axis, status in statuses.iter_rows()}
    where = _positions(order)
    out = []
    for check in checks:
        _, axis, gate = check.gate.split(".")
        rows = table.filter(pl.col("axis") == axis)
        if gate == "max_error_rate":
            if not built.get(axis, set()) - {"identical"}:
                out.extend(suite_only([check], len(order)))
                continue
            errored = np.zeros(len(order), dtype=bool)
            for case in rows.filter(pl.col("class") == "incomplete")["case_id"].to_list():
                errored[where[case]] = True
            out.append(limit_zero(check, errored, design))
            continue
        if "ok" not in built.get(axis, set()):
            out.extend(suite_only([check], len(order)))
            continue
        values, counted = np.zeros(len(order)), np.zeros(len(order))
        for case, d in case_differences(rows, attributed=attributed).select(
                "case_id", "d").iter_rows():
            values[where[case]], counted[where[case]] = d, 1.0
        excess = RatioGate(check.threshold, "<=", design.population,
                           floor=-1.0 if attributed else 0.0, target="model")
        ones = np.ones(len(order))
        out.append(Tracked(check, ones, ones, None,
                           composite=PersonaAxis(excess, values, counted, attributed, base)))
    return out


def diagnostic_tracked(contract: Contract, spec: RunSpec, checks: Sequence[Check],
                       order: Sequence[str], inputs: DiagnosticInputs,
                       design: Design) -> list[Tracked]:
    """The diagnostic checks (`stability.*`, `blindness.*`, `counterfactual.*`) with their
    per-case values over the sent cases (`order`), in the order of `checks`."""
    labels = tuple(contract.decision.labels)
    persona = [c for c in checks if c.gate.startswith("counterfactual.")]
    tracked = {id(t.check): t for t in _persona(contract, spec, persona, inputs, order,
                                                 design)}
    out = []
    for check in checks:
        if check.gate == "stability.verdict":
            out.append(_stability(check, inputs.rows, order, design, spec.rounding_seed))
        elif check.gate == "blindness.max_skew":
            out.append(_blindness(check, labels, inputs.rows, order, design))
        elif id(check) in tracked:
            out.append(tracked[id(check)])
        else:
            out.extend(suite_only([check], len(order)))
    return out
