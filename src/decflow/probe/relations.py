"""Typed metamorphic relations for the probe.

A relation turns an input into a follow-up question and checks a law between the agent's
answers to both. The type (invariant, monotone, directional) only labels the report, so a
reader can weigh a violation against the rerun noise; the check carries the meaning. An
input the transform leaves byte-identical is skipped, never passed: re-asking the same
question measures rerun stability, which is the meter's job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from decflow.diagnostics.blindness import BlindnessResult, blindness_check
from decflow.gates.checks import Check as GateCheck
from decflow.gates.checks import make_check
from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.metrics.evidence import ALPHA, count_evidence
from decflow.probe.observation import LAYERS, Observation
from decflow.properties import case_swap
from decflow.properties.normalization import collapse_whitespace, strip_accents

RelationType = Literal["invariant", "monotone", "directional"]
RELATION_TYPES: tuple[str, ...] = get_args(RelationType)
Check = Callable[[Observation, Observation], bool]


@dataclass(frozen=True)
class Relation:
    name: str
    type: RelationType
    transform: Callable[[str], str]
    check: Check
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a relation needs a non-empty name")
        if self.type not in RELATION_TYPES:
            raise ValueError(
                f"relation {self.name!r}: type must be one of {', '.join(RELATION_TYPES)}, "
                f"got {self.type!r}"
            )
        if not callable(self.transform) or not callable(self.check):
            raise ValueError(f"relation {self.name!r}: transform and check must be callable")


@dataclass(frozen=True)
class RelationResult:
    name: str
    type: str
    total: int  # inputs the relation was offered
    held: int
    violated: int
    skipped: int  # the transform returned the input unchanged: no call, no outcome
    errors: int  # a call or the check failed: neither held nor violated

    @property
    def exercised(self) -> int:
        return self.held + self.violated

    @property
    def violation_rate(self) -> float | None:
        return self.violated / self.exercised if self.exercised else None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        """One-sided 95 % exact bounds (Clopper–Pearson; one follow-up per input, so the input
        is the unit) on the violation rate; (None, None) when nothing was exercised."""
        if not self.exercised:
            return None, None
        return (clopper_pearson_low(self.violated, self.exercised, ALPHA),
                clopper_pearson_high(self.violated, self.exercised, ALPHA))

    @property
    def is_vacuous(self) -> bool:
        return self.total > 0 and self.exercised == 0

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            **asdict(self),
            "exercised": self.exercised,
            "violation_rate": self.violation_rate,
            "ci_low": low,
            "ci_high": high,
            "vacuous": self.is_vacuous,
        }


def relation_check(result: RelationResult) -> GateCheck:
    """A relation as a gate: `<name>.max_violation_rate` 0, a count (one violation fails,
    "0 of n" holds with its exact upper bound); a relation that changed no input (or whose
    every pair errored) is not established, never a pass."""
    gate, metric = f"{result.name}.max_violation_rate", f"{result.name}.violation_rate"
    if not result.exercised:
        return GateCheck(gate, "requirement", metric, "<=", 0.0, None, "not_established",
                         f"{metric} not established: the transform changed no input"
                         if result.skipped else f"{metric} not established: every pair errored")
    evidence = count_evidence(result.violated, result.exercised)
    return replace(make_check(gate, "requirement", metric, "<=", 0.0, result.violation_rate),
                   evidence=evidence)


def probe_checks(blindness: BlindnessResult, relations: Sequence[RelationResult],
                 ) -> list[GateCheck]:
    """The probe's gates: `blindness.max_skew` (fails when the agent is blind; not
    established when no first draw was decided), then each relation's."""
    blind = blindness_check(blindness, "requirement")
    if blindness.skew is None:
        blind = replace(blind, status="not_established",
                        message="blindness.skew not established: no first draw was decided")
    return [blind, *(relation_check(r) for r in relations)]


def same_on(layer: str) -> Check:
    """Invariance check: both answers compare equal on `layer`."""
    if layer not in LAYERS:
        raise ValueError(f"layer must be one of {', '.join(LAYERS)}, got {layer!r}")
    return lambda source, followup: source.key(layer) == followup.key(layer)


def ordered(order: Sequence[str], *, layer: str = "verdict") -> Check:
    """Monotone check: the follow-up's answer ranks at least as high in `order` as the source's
    (for example `ordered(["allow", "review", "block"])` after adding an urgent cue)."""
    rank = {label: i for i, label in enumerate(order)}

    def check(source: Observation, followup: Observation) -> bool:
        return rank[source.key(layer)] <= rank[followup.key(layer)]

    return check


def normalize(text: str) -> str:
    """Accents stripped, whitespace runs collapsed, ends trimmed."""
    return collapse_whitespace(strip_accents(text))


def pad_whitespace(text: str) -> str:
    """A leading newline and two trailing spaces: changes every input."""
    return "\n" + text + "  "


def builtin_relations(layer: str = "verdict") -> list[Relation]:
    """normalization, case_swap and whitespace on `layer`; tool_selection always on tools."""
    return [
        Relation("normalization", "invariant", normalize, same_on(layer),
                 "stripping accents and collapsing whitespace must not change the answer"),
        Relation("case_swap", "invariant", case_swap.apply, same_on(layer),
                 "inverting the letter case must not change the answer"),
        Relation("whitespace", "invariant", pad_whitespace, same_on(layer),
                 "a leading newline and trailing spaces must not change the answer"),
        Relation("tool_selection", "invariant", normalize, same_on("tools"),
                 "normalising the request must not change which tools the agent calls"),
    ]
