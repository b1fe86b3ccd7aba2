"""Evidence-gated production gates (`production.gating: evidence`; always in `monitor`).

The same gates as DecGuard's point verdicts (`decflow.gates.production`), judged by what the
records show rather than by the observed value (docs/statistics.md, "Evidence-gated
production gates"):

- rates (accuracy, error, coverage, abstention, fallback) by exact binomial bounds, a limit
  of 0 as a count; Brier and NLL by Chernoff bounds from their sums; the binned ECE and the
  drift distances (confidence TV, ECE increase) against their noise floor at the window's n
  (`decflow.metrics.noise_floor`); the accuracy drop by both samples' exact bounds
  (`decflow.metrics.rate_bounds`);
- tri-state: `fail` (or `warn`) only when shown beyond the limit, `pass` only when shown
  within it, otherwise `not_established` with the cases needed and the detectable effect;
- families: a wrong FAIL is controlled over every check of a level (aggregate gates and all
  segments' gates together) by Holm's procedure, so the chance that any requirement fails
  wrongly is ≤ α; a PASS needs each check shown to hold at α, which makes "every check (every
  segment) holds" an intersection–union test at α with no correction;
- a value that cannot be computed (no eligible record, no baseline) is *not established*,
  never a pass.

Everything here is a function of a check report's stored numbers (metrics, the baseline's
metrics, the segments' metrics), so a stored report re-derives its verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from decflow.contracts.extensions import gating_rule
from decflow.contracts.gates import PRODUCTION_GATES, ProductionGates
from decflow.data.records.rules import shown_segment_value
from decflow.gates.checks import Check, Comparison, Level, evidence_check
from decflow.gates.production import (
    NO_BASELINE,
    NO_RECORDS,
    GateTable,
    aggregate_checks,
    gate_table,
    segment_checks,
)
from decflow.metrics.evidence import ALPHA, Evidence, MeanTest, verdict_from_p
from decflow.metrics.golden_metrics import NLL_FLOOR
from decflow.metrics.noise_floor import (
    LARGER_BASELINE,
    Bins,
    ece_increase_test,
    ece_test,
    tv_test,
)
from decflow.metrics.production import Metrics
from decflow.metrics.rate_bounds import drop_test, rate_test, sum_mean_test
from decflow.metrics.stats import holm

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.gates import Gating, Production

NLL_RANGE = -math.log(NLL_FLOOR)  # DecGuard's clamp bounds a record's NLL at 34.5


def production_gating(contract: Contract) -> tuple[Gating, str]:
    """(gating, why) of a production check (`monitor` windows are always evidence)."""
    return gating_rule(contract, "production")


def stored_gating(config: Mapping[str, Any]) -> Gating:
    """How a stored check report was judged (its `config.gating`; point before decflow/4)."""
    gating = config.get("gating") or "point"
    if gating == "evidence":
        return "evidence"
    if gating == "point":
        return "point"
    raise ValueError(f"config.gating must be 'evidence' or 'point', got {gating!r}")


def _count(section: Mapping[str, Any] | None, rate_key: str, n_key: str) -> tuple[int, int]:
    if not section or section.get(rate_key) is None:
        return 0, 0
    n = int(section[n_key])
    return round(float(section[rate_key]) * n), n


def metric_test(metric: str, comparison: str, limit: float, metrics: Metrics,
                baseline: Metrics | None, *, alpha: float = ALPHA) -> MeanTest | None:
    """The test of one production gate's metric against its limit at level `alpha` (None
    when the metric cannot be computed: no eligible record, or no baseline for a drift
    gate)."""
    rate = next((entry.rate for entry in PRODUCTION_GATES.entries()
                 if entry.metric == metric and entry.rate is not None), None)
    if rate is not None:  # a count over records: exact bounds
        count, n = _count(metrics.get(rate.section), rate.key, rate.size)
        return rate_test(count, n, limit, comparison, alpha=alpha)
    calibration = metrics["calibration"]
    if metric in ("brier", "nll"):
        mean, n = calibration.get(metric), int(calibration.get("n_label_outcomes") or 0)
        if mean is None:
            return None
        return sum_mean_test(float(mean) * n, n, limit, 2.0 if metric == "brier" else NLL_RANGE,
                             alpha=alpha)
    if metric == "ece":
        return ece_test(Bins.of(calibration["reliability"]), limit, alpha=alpha)
    if baseline is None:
        return None
    if metric == "confidence_tv_distance":
        return tv_test(metrics["confidence"]["histogram"], baseline["confidence"]["histogram"],
                       limit, alpha=alpha)
    if metric == "accuracy_drop":
        correct, n = _count(metrics["outcomes"], "accuracy", "n")
        base_correct, base_n = _count(baseline["outcomes"], "accuracy", "n")
        return drop_test(base_correct, base_n, correct, n, limit, alpha=alpha)
    if metric == "ece_increase":
        return ece_increase_test(Bins.of(calibration["reliability"]),
                                 Bins.of(baseline["calibration"]["reliability"]), limit,
                                 alpha=alpha)
    raise ValueError(f"no evidence test for the production metric {metric!r}")


@dataclass(frozen=True)
class _Gate:
    """One configured gate of the aggregate or a segment, with its test at the family's α
    and the same test at any level (`retest(alpha=…)`)."""

    name: str
    level: Level
    metric: str
    comparison: Comparison
    limit: float
    test: MeanTest | None
    retest: Callable[..., MeanTest | None]
    reason: str

    def p_fail(self) -> float:
        assert self.test is not None
        return self.test.p_above if self.comparison == "<=" else self.test.p_below

    def on_failing_side(self) -> bool:
        """The estimate lies beyond the limit (a FAIL is the verdict it points to)."""
        estimate = None if self.test is None else self.test.estimate
        if estimate is None:
            return False
        return estimate > self.limit if self.comparison == "<=" else estimate < self.limit


def _gates(gates: ProductionGates, level: Level, table: GateTable,
           metrics: Metrics, baseline: Metrics | None, prefix: str, alpha: float
           ) -> list[_Gate]:
    drift = {entry.metric for entry in PRODUCTION_GATES.entries() if entry.drift}
    out = []
    for gate, metric, comparison in table:
        limit = gates.limit(gate)
        if limit is None:
            continue
        retest = partial(metric_test, metric, comparison, float(limit), metrics, baseline)
        out.append(_Gate(prefix + gate, level, prefix + metric, comparison,  # type: ignore[arg-type]
                         float(limit), retest(alpha=alpha), retest,
                         NO_BASELINE if metric in drift else NO_RECORDS))
    return out


def _judged(gates: Sequence[_Gate], alpha: float) -> list[Check]:
    """Checks of one level's family: Holm on the side that fails, each alone on the side
    that holds (intersection–union). An undecided check whose estimate points to a FAIL is
    planned at the level Holm would ask of it: with r checks of the family failed, one
    more fails once its own p-value is below α/(m − r), so its cases needed and detectable
    effect are those of its test at that level (at α they could name fewer cases than it
    already has)."""
    tested = [g for g in gates if g.test is not None]
    adjusted = dict(zip((id(g) for g in tested), holm([g.p_fail() for g in tested]),
                        strict=True))
    holm_level = alpha / max(1, sum(p >= alpha for p in adjusted.values()))
    checks = []
    for gate in gates:
        if gate.test is None:
            checks.append(_unavailable(gate))
            continue
        test, p_fail = gate.test, adjusted[id(gate)]
        p_hold = test.p_below if gate.comparison == "<=" else test.p_above
        p_above, p_below = (p_fail, p_hold) if gate.comparison == "<=" else (p_hold, p_fail)
        verdict = verdict_from_p(gate.comparison, p_above, p_below, alpha)  # type: ignore[arg-type]
        notes = [f"Holm across {len(tested)} {gate.level} checks"] if len(tested) > 1 else []
        evidence = test.evidence(gate.comparison, verdict=verdict, notes=notes,  # type: ignore[arg-type]
                                 alpha=alpha)
        if verdict == "not_established" and holm_level < alpha and gate.on_failing_side():
            planned = gate.retest(alpha=holm_level)
            if planned is not None:
                evidence = replace(evidence, cases_needed=planned.cases_needed,
                                   detectable=planned.detectable,
                                   notes=(*evidence.notes,
                                          f"planned at Holm's level {holm_level:.3g}"))
        # a gate no window size can decide says so on its line, not only in its evidence
        suffix = "".join(f"; {note}" for note in test.notes if note.endswith(LARGER_BASELINE))
        checks.append(evidence_check(gate.name, gate.level, gate.metric, gate.comparison,
                                     gate.limit, evidence, suffix=suffix))
    return checks


def _unavailable(gate: _Gate) -> Check:
    evidence = Evidence(method="no evidence", n=0, verdict="not_established",
                        notes=(gate.reason,))
    return Check(gate=gate.name, level=gate.level, metric=gate.metric,
                 comparison=gate.comparison, threshold=gate.limit, value=None,
                 status="not_established",
                 message=f"{gate.metric} could not be computed ({gate.reason}); not established",
                 evidence=evidence)


def evidence_checks(
    production: Production, metrics: Metrics, baseline: Metrics | None,
    segments: Sequence[tuple[str, Metrics]], *, alpha: float = ALPHA,
) -> tuple[list[Check], list[list[Check]]]:
    """The aggregate checks (requirements, then warnings) and each segment's checks (its
    requirements, then its warnings; `segments` as (`key=value`, metrics)), in the order of
    the point verdicts, judged by evidence with Holm over each level's family."""
    levels: list[tuple[Level, ProductionGates, ProductionGates]] = [
        ("requirement", production.requirements, production.segment_requirements),
        ("warning", production.warnings, production.segment_warnings)]
    aggregate = [g for level, gates, _ in levels
                 for g in _gates(gates, level, gate_table(segment=False), metrics, baseline,
                                 "", alpha)]
    per_segment = [[g for level, _, gates in levels
                    for g in _gates(gates, level, gate_table(segment=True), seg_metrics, None,
                                    f"segment[{name}].", alpha)]
                   for name, seg_metrics in segments]
    everything = aggregate + [g for gates in per_segment for g in gates]
    judged: dict[int, Check] = {}
    for level in ("requirement", "warning"):
        family = [g for g in everything if g.level == level]
        judged.update(zip((id(g) for g in family), _judged(family, alpha), strict=True))
    return ([judged[id(g)] for g in aggregate],
            [[judged[id(g)] for g in gates] for gates in per_segment])


def check_report_checks(
    production: Production, metrics: Metrics, drift: Mapping[str, float | None],
    segments: Sequence[Mapping[str, Any]], *, gating: Gating = "point",
    baseline: Metrics | None = None,
) -> tuple[list[Check], list[list[Check]]]:
    """Every check of a check report judged from its stored numbers: the aggregate checks
    (metrics and drift) and each segment's checks, by DecGuard's point estimates or by
    evidence (which needs the baseline's metrics for the drift gates)."""
    names = [f"{entry['key']}={shown_segment_value(entry['value'])}" for entry in segments]
    if gating == "evidence":
        return evidence_checks(production, metrics, baseline,
                               [(name, entry["metrics"]) for name, entry
                                in zip(names, segments, strict=True)])
    return (aggregate_checks(production, metrics, drift),
            [segment_checks(production, name, entry["metrics"])
             for name, entry in zip(names, segments, strict=True)])
