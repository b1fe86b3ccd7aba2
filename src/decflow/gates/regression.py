"""Regression gates: the contract's top-level `regression` keys are requirements, the same
keys under `regression.warnings` are warnings. Every gate is "value <= limit".

Two ways to judge them (`regression.gating`):

- `point` (DecGuard 0.1, and every DecGuard contract or report): the observed difference
  against the limit, byte-equal to DecGuard. `max_error_rate_increase: 0` is an implicit
  requirement when the contract does not set it (also when no contract is given); a value
  that cannot be computed fails.
- `evidence` (decflow): tri-state verdicts from paired, case-clustered evidence
  (`metrics.regression_evidence`): *regressed* when the one-sided 95 % lower bound of the
  change is above the limit (FAIL, or WARN at warning level), *held* when the upper bound is
  below it (PASS), otherwise *not established* (WARN with the cases needed). Flips, mean TV
  and confidence shift are judged on what they add to the model's own rerun noise; without
  measured noise they are not established and say how to measure it (never a FAIL on raw
  flips). Segments are Holm-adjusted on each side; latency stays a point estimate; limit-0
  gates stay counts (the implicit error-rate gate: one newly errored case fails).

Either way the same evidence is computed for the report (`GateEvidence`), beside a point
verdict it never changes, with a decision phrase per gate for the headline
("accuracy -4.1 points [-6.0, -2.2], noise ±0.9: regressed").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from decflow.contracts.gates import (
    GOLDEN_GATES,
    Gating,
    GoldenGate,
    RegressionGate,
    regression_gate,
    regression_gates,
)
from decflow.gates.checks import Check, Level, evidence_check, make_check
from decflow.gates.headline import brief, headline, number
from decflow.metrics.evidence import NOISE_DOMINATED, Evidence
from decflow.metrics.regression_evidence import ChangeEvidence, PairedDiff, SegmentRows
from decflow.registry import imported

if TYPE_CHECKING:
    from decflow.contracts.gates import Regression

NO_COMPARABLE = "no comparable cases"
# Judged against the rerun noise (evidence gating names them as attributed).
ATTRIBUTED = {"answer_flip_rate": "attributed_flip_rate",
              "mean_tv_distance": "attributed_mean_tv_distance",
              "mean_confidence_shift": "attributed_confidence_shift"}
SEGMENT_DROP = "segment_accuracy_drop"
WORDS = {"fails": "regressed", "holds": "held", "not_established": "not established"}
NOISE_ADVICE = (
    "rerun noise not measured: run `decflow diff BASELINE CANDIDATE --noise-reruns 2` "
    "(re-sends the candidate's requests twice) or add a diagnostics.stability section"
)


def _by_metric(metric: str) -> RegressionGate:
    return next(gate for gate in regression_gates() if gate.metric == metric)


def _in_points(gate: RegressionGate) -> bool:
    """Shown as a change in percentage points: a drop, or the change of a share of cases
    (a golden gate counting cases)."""
    if gate.drop or gate.metric == SEGMENT_DROP:
        return True
    golden = _golden_of(gate)
    return golden is not None and golden.counts_cases


def _golden_of(gate: RegressionGate) -> GoldenGate | None:
    """The golden gate on the metric whose change `gate` gates."""
    return next((g for g in GOLDEN_GATES.entries() if g.metric == gate.change_of), None)


def _negated(value: float | None) -> float | None:
    # A drop is the negated delta (so no change reads -0, as in the reference).
    return None if value is None else -value


def regression_values(diff: Mapping[str, Any]) -> tuple[dict[str, float | None], str]:
    """The value of every gate's metric (an extension's only when the diff measured it),
    and the worst gated segment as `key=value`."""
    delta = {name: entry["delta"] for name, entry in diff["metrics"].items()}
    shift = diff["shift"]
    gated = [s for s in diff["segments"] if s["gated"] and s["accuracy_drop"] is not None]
    worst = max(gated, key=lambda s: s["accuracy_drop"], default=None)
    values: dict[str, float | None] = {}
    for gate in regression_gates():
        if gate.shift is not None:
            values[gate.metric] = shift[gate.shift]
        elif gate.change_of is not None and (gate.core or gate.change_of in delta):
            change = delta[gate.change_of]
            values[gate.metric] = _negated(change) if gate.drop else change
        elif gate.needs_segment_by:
            values[gate.metric] = None if worst is None else worst["accuracy_drop"]
    return values, "" if worst is None else f"{worst['key']}={worst['value']}"


@dataclass(frozen=True)
class GateEvidence:
    """The evidence on one configured gate (None: nothing to infer from, e.g. flips without
    measured noise, or latency), its verdict and decision phrase."""

    gate: str
    level: Level
    metric: str
    limit: float
    evidence: ChangeEvidence | None
    verdict: str  # holds | fails | not_established | point (latency)
    phrase: str
    segment: str | None = None  # the deciding segment, `key=value`
    segments: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        found = self.evidence
        out: dict[str, Any] = {"gate": self.gate, "level": self.level, "metric": self.metric,
                               "limit": self.limit, "verdict": self.verdict,
                               "phrase": self.phrase}
        if found is not None:
            out.update({
                "method": found.method, "n": found.n, "estimate": found.estimate,
                "low": found.low, "high": found.high, "noise": found.noise,
                "raw": found.raw, "cases_needed": found.cases_needed,
                "detectable": found.detectable,
                "notes": list(found.evidence().notes), **found.details,
            })
        if self.segment is not None:
            out["segment"] = self.segment
        if self.segments:
            out["segments"] = list(self.segments)
        return out


def _points(value: float | None, sign: str = "+") -> str:
    """A rate in percentage points, one decimal (`+4.1`, `-6.0`; never `-0.0`)."""
    if value is None:
        return "n/a"
    text = f"{100.0 * value:{sign}.1f}"
    return "0.0" if float(text) == 0.0 else text


def _interval(low: float | None, high: float | None, scale: float, as_points: bool) -> str:
    if low is None or high is None:
        return ""
    a, b = sorted((scale * low, scale * high))
    if as_points:
        return f" [{_points(a, '')}, {_points(b, '')}]"
    return f" [{number(a)}, {number(b)}]"


def decision_phrase(metric: str, found: ChangeEvidence | None, verdict: str,
                    segment: str | None = None) -> str:
    """`accuracy -4.1 points [-6.0, -2.2], noise ±0.9: regressed` and its kin."""
    gate = _by_metric(metric)
    name = gate.words + (f" in {segment}" if segment else "")
    word = WORDS.get(verdict, verdict)
    if found is None:
        return f"{name}: {word}" if metric not in ATTRIBUTED else (
            f"{name} not established: rerun noise not measured")
    if found.is_count:
        what = {"newly_errored": "newly errored", "flip": "flipped"}.get(gate.failing or "",
                                                                          "newly worse")
        count = round((found.estimate or 0.0) * found.n)
        return f"{name}: {count} of {found.n} {what}: {word}"
    needed = "" if verdict != "not_established" or found.cases_needed is None else (
        f" (about {found.cases_needed} cases needed)")
    if metric in ATTRIBUTED:
        rate = metric == "answer_flip_rate"
        excess = _points(found.estimate) + " points" if rate else _signed(found.estimate)
        noise = (f"{100.0 * found.noise:.1f}%" if rate else number(found.noise)) \
            if found.noise is not None else "n/a"
        interval = _interval(found.low, found.high, 1.0, rate)
        return f"{name} {excess} over noise {noise}{interval}: {word}{needed}"
    drop = gate.drop or metric == SEGMENT_DROP
    as_points = _in_points(gate)
    scale = -1.0 if drop else 1.0
    shown = (_points(None if found.estimate is None else scale * found.estimate) + " points"
             if as_points else _signed(found.estimate))
    interval = _interval(found.low, found.high, scale, as_points)
    noise = ""
    if found.noise is not None:
        noise = f", noise ±{100.0 * found.noise:.1f}" if as_points else \
            f", noise ±{number(found.noise)}"
    return f"{name} {shown}{interval}{noise}: {word}{needed}"


def _signed(value: float | None) -> str:
    if value is None:
        return "n/a"
    text = number(value)
    return text if text.startswith("-") or text == "0" else f"+{text}"


def _record(found: ChangeEvidence, metric: str) -> Evidence:
    """The check's evidence; a change inside its noise floor is noted noise-dominated."""
    noted = found.noise is not None and found.estimate is not None \
        and metric not in ATTRIBUTED and abs(found.estimate) <= found.noise
    return found.evidence((NOISE_DOMINATED,) if noted else ())


def _segment_evidence(
    paired: PairedDiff, segments: Sequence[SegmentRows], limit: float
) -> tuple[ChangeEvidence | None, str, str | None, tuple[dict[str, Any], ...]]:
    """Holm on each side across the gated segments: fails when one is shown above the
    limit, holds when every one is shown below; the evidence of the deciding segment (the
    failing one with the largest drop, else the worst)."""
    found = paired.segment_drops(segments, limit)
    if not found:
        return None, "not_established", None, ()
    rows = tuple({"segment": f"{s.key}={s.value}", "n": e.n, "estimate": e.estimate,
                  "low": e.low, "high": e.high, "verdict": e.verdict()} for s, e in found)
    failing = [(s, e) for s, e in found if e.verdict() == "fails"]
    if failing:
        segment, evidence = max(failing, key=lambda item: item[1].estimate or 0.0)
        verdict = "fails"
    else:
        segment, evidence = max(found, key=lambda item: item[1].estimate or 0.0)
        held = all(e.verdict() == "holds" for _, e in found)
        verdict = "holds" if held else "not_established"
    return evidence, verdict, f"{segment.key}={segment.value}", rows


def _paired_test(paired: PairedDiff, metric: str) -> Any:
    """decflow's own paired test of a DecGuard diff metric (None: none)."""
    return {
        "answer_flip_rate": paired.attributed_flips,
        "accuracy_drop": paired.accuracy_drop,
        "macro_f1_drop": paired.macro_f1_drop,
        "ece_increase": paired.ece_increase,
        "brier_increase": paired.brier_increase,
        "nll_increase": paired.nll_increase,
        "mean_tv_distance": paired.attributed_tv,
        "mean_confidence_shift": paired.attributed_confidence,
        "error_rate_increase": paired.error_rate_increase,
    }.get(metric)


def _change_test(paired: PairedDiff, gate: RegressionGate, limit: float
                 ) -> ChangeEvidence | str | None:
    """The evidence on a diff gate: decflow's own test, else the case-by-case change of
    its golden gate's per-case ratio; "point" when there is neither (latency p95)."""
    test = _paired_test(paired, gate.metric)
    if test is not None:
        found: ChangeEvidence | None = test(limit)
        return found
    golden = _golden_of(gate)
    if golden is None or golden.per_case is None:
        return "point"
    return paired.ratio_change(imported(golden.per_case), limit, drop=gate.drop,
                               counts=golden.counts_cases)


def gate_evidence(
    paired: PairedDiff, segments: Sequence[SegmentRows], gate: str, metric: str,
    level: Level, limit: float,
) -> GateEvidence:
    """The evidence and verdict of one gate at one limit."""
    limit = float(limit)
    spec = regression_gate(gate) or _by_metric(metric)
    segment: str | None = None
    rows: tuple[dict[str, Any], ...] = ()
    found: ChangeEvidence | None
    if spec.needs_segment_by:
        found, verdict, segment, rows = _segment_evidence(paired, segments, limit)
    else:
        tested = _change_test(paired, spec, limit)
        if isinstance(tested, str):  # a point estimate
            found, verdict = None, tested
        else:
            found = tested
            verdict = "not_established" if found is None else found.verdict()
    return GateEvidence(gate, level, metric, limit, found, verdict,
                        decision_phrase(metric, found, verdict, segment), segment, rows)


def _evidence_check(found: GateEvidence, point: Check) -> Check:
    """The tri-state check of an evidence-gated diff (latency keeps its point check)."""
    if found.verdict == "point":
        return point
    metric = ATTRIBUTED.get(found.metric, found.metric)
    suffix = f" (segment {found.segment})" if found.segment else ""
    evidence = found.evidence
    if evidence is None:
        reason = NOISE_ADVICE if found.metric in ATTRIBUTED else (
            "no segment with enough cases" if found.metric == SEGMENT_DROP
            else NO_COMPARABLE)
        record = Evidence(method="none", n=0, verdict="not_established",
                          notes=(reason,))
        return evidence_check(found.gate, found.level, metric, "<=", found.limit, record,
                              suffix=f" ({reason})")
    if evidence.noise is not None and found.metric in ATTRIBUTED:
        suffix += f" (raw {number(evidence.raw)}, rerun noise {number(evidence.noise)})"
    elif evidence.noise is not None:
        suffix += f" (noise ±{number(evidence.noise)})"
    return evidence_check(found.gate, found.level, metric, "<=", found.limit,
                          _record(evidence, found.metric), suffix=suffix)


@dataclass(frozen=True)
class RegressionVerdicts:
    """The checks of a diff (report order), the evidence on each configured gate, and how
    they were judged."""

    checks: list[Check]
    gates: list[GateEvidence] = field(default_factory=list)
    gating: Gating = "point"

    def headline(self, status: str) -> str:
        """The diff's first line: the headline, each open item as its decision phrase;
        a passing evidence diff names what held."""
        # a gate judged by its point value (latency, an extension's) reads as its check
        phrases = {(g.gate, g.level): g.phrase for g in self.gates if g.verdict != "point"}

        def item(check: Check) -> str:
            if self.gating != "evidence" or (check.gate, check.level) not in phrases:
                return brief(check)
            suffix = " (warning)" if check.level == "warning" else ""
            return f"{phrases[(check.gate, check.level)]}{suffix}"

        line = headline(status, self.checks, item=item)
        held = [g.phrase for g in self.gates if g.verdict == "holds" and g.evidence is not None]
        if self.gating == "evidence" and status == "pass" and held:
            line += "; " + held[0]
        return line


def _configured(regression: Regression | None) -> list[tuple[str, str, Level, float]]:
    """(gate, metric, level, limit) of every gate a diff judges: the requirements in check
    order, each implicit requirement the contract does not set (`max_error_rate_increase:
    0`, also without a contract), then the warnings in check order."""
    found: list[tuple[str, str, Level, float]] = []
    levels: tuple[Level, ...] = ("requirement", "warning")
    for level in levels:
        for gate in regression_gates():
            limit = None if regression is None else regression.limit(level, gate.name)
            if limit is not None:
                found.append((gate.name, gate.metric, level, limit))
        if level == "requirement":
            found += [(gate.name, gate.metric, level, gate.implicit)
                      for gate in regression_gates() if gate.implicit is not None and (
                          regression is None or regression.limit(level, gate.name) is None)]
    return found


def regression_checks(
    regression: Regression | None,
    diff: Mapping[str, Any],
    *,
    paired: PairedDiff | None = None,
    segments: Sequence[SegmentRows] = (),
    gating: Gating = "point",
) -> RegressionVerdicts:
    """Requirement checks (table order, then the implicit error-rate gate if unset), then
    warning checks. `regression` is the contract's section, or None without a contract.
    With `paired`, every gate's evidence is computed; it decides the checks only under
    `evidence` gating."""
    values, worst = regression_values(diff)
    checks, gates = [], []
    for gate, metric, level, limit in _configured(regression):
        suffix = f" (worst segment {worst})" if metric == SEGMENT_DROP and worst else ""
        point = make_check(gate, level, metric, "<=", limit, values.get(metric),
                           reason_if_null=NO_COMPARABLE, suffix=suffix)
        if paired is None:
            checks.append(point)
            continue
        found = gate_evidence(paired, segments, gate, metric, level, limit)
        gates.append(found)
        checks.append(_evidence_check(found, point) if gating == "evidence" else point)
    return RegressionVerdicts(checks, gates, gating)
