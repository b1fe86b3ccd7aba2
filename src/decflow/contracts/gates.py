"""Gate sections: golden `requirements`/`warnings`, `regression` and `production` gates.

Golden gates are a registry (`GOLDEN_GATES`): each entry declares its contract field, the
metric it reads, its comparison, its evidence and how a sequential run tracks it, and the
whole of decflow (contract model, checks, evidence, `--plan`, sequential runs, report
verification) reads it there; a gate registered before the first contract is read (an
extension's, a test's) is a gate like the built-ins. Field order is the fixed check order
of the reference (gates are evaluated in table order).
"""

# No `from __future__ import annotations` here: pydantic would compile and evaluate every
# field's annotation string again for each model (and each subclass) it collects.

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from decflow.contracts.base import (
    NonNegative,
    StrictModel,
    UniqueTexts,
    Unit,
    UpToTwo,
    built,
    empty_list,
)
from decflow.registry import Registry

# `regression.gating`: how a diff judges its gates. `evidence` (decflow): tri-state verdicts
# from paired, case-clustered intervals; `point` (DecGuard 0.1): the observed difference.
Gating = Literal["evidence", "point"]

# decflow's own gates among DecGuard's: left out of the canonical JSON when unset, so a
# DecGuard 0.1 contract hashes as before. SmoothECE's limit starts at 0.01, the finest
# bandwidth the production check's merged grid resolves (decflow.metrics.smooth_ece).
SmoothEceLimit = Annotated[float, Field(ge=0.01, lt=1.0)]
Comparison = Literal[">=", "<="]
# The stored cases behind a failing golden gate (`decflow.report.failing`): the errored
# ones, the wrongly answered ones (`wrong_covered`: at or above the confidence threshold).
FailingCases = Literal["errored", "wrong", "wrong_covered"]


@dataclass(frozen=True)
class RateOf:
    """Where a golden rate counted over cases sits in the run's metrics: its section, its
    key and the key of its denominator (accuracy: `classification.accuracy` of `n`)."""

    section: str
    key: str
    size: str


@dataclass(frozen=True)
class GoldenGate:
    """A golden gate (`requirements.<name>`, `warnings.<name>`) as every part of decflow
    knows it: the type of its limit, the metric it reads (`metric_path`: its section and key
    in the run's metrics; an extension's metric sits under `extensions`) and the comparison
    that must hold. The rest says how it is judged beyond that point verdict:

    - `per_case`: `module:function` of `decflow.metrics.golden_cases.CaseValues` → (per-case
      numerator, denominator, largest numerator per unit of denominator): the metric is
      their ratio; a sequential run tracks it case by case (`binary`: numerators are 0/1,
      the exact bounds apply); an extension gate's metric is computed from it.
    - `composite`: `module:function(values, limit, population)` → the sequential
      `Composite` of a gate no per-case ratio decides (ECE, macro-F1, latency p95), and
      `plan`: `module:function(limit, cases, labels)` → how `--plan` sizes it
      (`decflow.metrics.sequential.Planned`; None: counted in the run's α, not sized).
    - `rate`: a count over cases: exact binomial evidence beside its verdict.
    - `core`: one of DecGuard's (hashed as null when unset); otherwise a decflow extension,
      left out of the hash when unset and listed by `decflow_extensions`.
    - `needs_threshold` (only with `evaluation.confidence_threshold`), `score_only` (score
      decisions), `checked` (False: judged by its own checks, as `max_smooth_ece`).
    - `failing`: the stored cases that make it fail (None: no single case does).
    - `implicit`: the requirement's limit when the contract sets none (`max_error_rate: 0`,
      DecGuard's: a case the backend could not decide fails unless tolerated).
    - `diff`: the diff gate on the same metric (`regression.<diff>`: its increase,
      candidate − baseline, at most the limit; its drop for a `>=` gate), for an extension
      gate (`change_gate`)."""

    name: str
    limit: Any
    metric: str
    comparison: Comparison
    metric_path: tuple[str, str] | None = None
    per_case: str | None = None
    composite: str | None = None
    plan: str | None = None
    binary: bool = False
    rate: RateOf | None = None
    core: bool = True
    needs_threshold: bool = False
    score_only: bool = False
    checked: bool = True
    diff: str | None = None
    failing: FailingCases | None = None
    implicit: float | None = None

    @property
    def path(self) -> tuple[str, str]:
        """Where the gate's metric sits in a run's metrics."""
        return self.metric_path or ("extensions", self.metric)

    @property
    def counts_cases(self) -> bool:
        """Its metric is a share of cases (0/1 per case): exact bounds apply."""
        return self.rate is not None or self.binary


_CASES = "decflow.metrics.golden_cases"
_COMPOSITE = "decflow.metrics.sequential_composite"
# Registration order is the order checks are listed in (DecGuard's table order first).
GOLDEN_GATES: Registry[GoldenGate] = Registry("golden gate", lambda entry: entry.name)
for _gate in (
    GoldenGate("min_accuracy", Unit, "accuracy", ">=", ("classification", "accuracy"),
               per_case=f"{_CASES}:accuracy", rate=RateOf("classification", "accuracy", "n"),
               failing="wrong"),
    GoldenGate("min_macro_f1", Unit, "macro_f1", ">=", ("classification", "macro_f1"),
               composite=f"{_COMPOSITE}:macro_f1_of", plan=f"{_COMPOSITE}:macro_f1_plan",
               failing="wrong"),
    GoldenGate("max_nll", NonNegative, "nll", "<=", ("calibration", "nll"),
               per_case=f"{_CASES}:nll"),
    GoldenGate("max_brier", UpToTwo, "brier", "<=", ("calibration", "brier"),
               per_case=f"{_CASES}:brier"),
    GoldenGate("max_ece", Unit, "ece", "<=", ("calibration", "ece"),
               composite=f"{_COMPOSITE}:binned_ece_of"),
    GoldenGate("min_coverage", Unit, "coverage", ">=", ("selective", "coverage"),
               per_case=f"{_CASES}:coverage", rate=RateOf("selective", "coverage", "n"),
               needs_threshold=True),
    GoldenGate("max_abstention_rate", Unit, "abstention_rate", "<=",
               ("selective", "abstention_rate"), per_case=f"{_CASES}:abstention",
               rate=RateOf("selective", "abstention_rate", "n"), needs_threshold=True),
    GoldenGate("min_selective_accuracy", Unit, "selective_accuracy", ">=",
               ("selective", "selective_accuracy"), per_case=f"{_CASES}:selective_accuracy",
               rate=RateOf("selective", "selective_accuracy", "n_covered_labeled"),
               needs_threshold=True, failing="wrong_covered"),
    GoldenGate("max_error_rate", Unit, "error_rate", "<=", ("counts", "error_rate"),
               per_case=f"{_CASES}:error_rate", binary=True,
               rate=RateOf("counts", "error_rate", "total"), failing="errored",
               implicit=0.0),
    GoldenGate("max_latency_p95_ms", NonNegative, "latency_p95_ms", "<=", ("latency", "p95_ms"),
               composite=f"{_COMPOSITE}:latency_p95_of",
               plan=f"{_COMPOSITE}:latency_p95_plan"),
    GoldenGate("max_ordinal_mae", NonNegative, "ordinal_mae", "<=",
               ("classification", "ordinal_mae"), per_case=f"{_CASES}:ordinal_error",
               score_only=True),
    # decflow: evidence-gated SmoothECE, judged by its own checks (`gates.calibration`)
    GoldenGate("max_smooth_ece", SmoothEceLimit, "smooth_ece", "<=", core=False,
               checked=False),
):
    GOLDEN_GATES.register(_gate)


class GoldenGates(StrictModel):
    """A `requirements` or `warnings` section: an optional limit per registered golden gate
    (the model itself is `golden_gates_model()`, built from the registry)."""

    def limit(self, name: str) -> float | None:
        """The limit the section sets for gate `name` (None: unset)."""
        found = getattr(self, name, None)
        return None if found is None else float(found)

    def configured(self) -> dict[str, float]:
        """The limits the section sets, in gate order."""
        limits = ((entry.name, self.limit(entry.name)) for entry in GOLDEN_GATES.entries())
        return {name: limit for name, limit in limits if limit is not None}


@lru_cache(maxsize=1)
def golden_gates_model() -> type[GoldenGates]:
    """The section's model: one optional limit per registered golden gate (closes the
    registry: the first contract parsed fixes the gates every later one may use)."""
    fields: dict[str, Any] = {
        entry.name: (entry.limit | None, None) for entry in GOLDEN_GATES.entries()
    }
    return create_model("GoldenGates", __base__=GoldenGates, __module__=__name__, **fields)


def golden_gate(name: str) -> GoldenGate:
    return GOLDEN_GATES.get(name)


def extension_golden_gates() -> tuple[str, ...]:
    """The golden gates that are decflow's own (left out of the hash when unset)."""
    return tuple(entry.name for entry in GOLDEN_GATES.entries() if not entry.core)


def diff_gates() -> tuple[GoldenGate, ...]:
    """The golden gates that also gate a diff (`regression.<diff>`: the change of their
    metric), in gate order."""
    return tuple(entry for entry in GOLDEN_GATES.entries() if entry.diff is not None)


# The changed cases behind a failing diff gate (`decflow.report.failing`).
FailingChanges = Literal["flip", "newly_errored", "newly_wrong"]


@dataclass(frozen=True)
class RegressionGate:
    """A diff gate (`regression.<name>` a requirement, `regression.warnings.<name>` a
    warning): its metric, measured on the two runs' matched cases, at most the limit.

    - `change_of`: the golden metric whose change it gates, candidate − baseline (a drop,
      baseline − candidate, for a metric a golden gate wants high: `accuracy_drop`); read
      from the diff's metrics. Its paired evidence is decflow's own test for DecGuard's
      gates (`decflow.gates.regression`), else the per-case change of the golden gate's
      `per_case` ratio; a metric with neither (latency p95) keeps its point verdict.
    - `shift`: the key of the diff's `shift` it reads instead (answer flips, mean TV, the
      mean absolute confidence shift: judged against the rerun noise); neither: the worst
      gated segment's accuracy drop (`needs_segment_by`).
    - `words`: how a headline names it (`accuracy -4.1 points …: regressed`).
    - `core`, `implicit` (the requirement's limit when the contract sets none:
      `max_error_rate_increase: 0`, also without a contract) as for golden gates;
      `failing`: the changed cases behind a failure (`changes` of that kind)."""

    name: str
    limit: Any
    metric: str
    words: str
    change_of: str | None = None
    shift: str | None = None
    core: bool = True
    implicit: float | None = None
    needs_segment_by: bool = False
    failing: FailingChanges | None = None

    @property
    def drop(self) -> bool:
        """Its value is a drop, baseline − candidate: its metric is one a golden gate wants
        high (`>=`)."""
        return any(gate.metric == self.change_of and gate.comparison == ">="
                   for gate in GOLDEN_GATES.entries())


# Registration order is the order checks are listed in (DecGuard's table order); the diff
# gates of registered golden gates follow (`regression_gates`).
REGRESSION_GATES: Registry[RegressionGate] = Registry("regression gate",
                                                      lambda entry: entry.name)
for _regression in (
    RegressionGate("max_answer_flip_rate", Unit, "answer_flip_rate", "answer flips",
                   shift="answer_flip_rate", failing="flip"),
    RegressionGate("max_accuracy_drop", Unit, "accuracy_drop", "accuracy",
                   change_of="accuracy", failing="newly_wrong"),
    RegressionGate("max_macro_f1_drop", Unit, "macro_f1_drop", "macro-F1",
                   change_of="macro_f1", failing="newly_wrong"),
    RegressionGate("max_ece_increase", Unit, "ece_increase", "ECE", change_of="ece"),
    RegressionGate("max_brier_increase", UpToTwo, "brier_increase", "Brier",
                   change_of="brier"),
    RegressionGate("max_nll_increase", NonNegative, "nll_increase", "NLL", change_of="nll"),
    RegressionGate("max_mean_tv_distance", Unit, "mean_tv_distance", "mean TV",
                   shift="mean_tv_distance"),
    RegressionGate("max_mean_confidence_shift", Unit, "mean_confidence_shift",
                   "confidence shift", shift="mean_abs_confidence_delta"),
    RegressionGate("max_error_rate_increase", Unit, "error_rate_increase", "error rate",
                   change_of="error_rate", implicit=0.0, failing="newly_errored"),
    RegressionGate("max_latency_p95_increase_ms", NonNegative, "latency_p95_increase_ms",
                   "p95 latency", change_of="latency_p95_ms"),
    RegressionGate("max_segment_accuracy_drop", Unit, "segment_accuracy_drop", "accuracy",
                   needs_segment_by=True),
):
    REGRESSION_GATES.register(_regression)


def change_gate(gate: GoldenGate) -> RegressionGate:
    """The diff gate a golden gate declares (`GoldenGate.diff`): the increase of its metric,
    or its drop when the golden gate wants it high (`>=`)."""
    assert gate.diff is not None
    change = "drop" if gate.comparison == ">=" else "increase"
    return RegressionGate(gate.diff, gate.limit, f"{gate.metric}_{change}",
                          gate.metric.replace("_", " "), change_of=gate.metric,
                          core=gate.core)


@lru_cache(maxsize=1)
def regression_gates() -> tuple[RegressionGate, ...]:
    """Every diff gate in check order: the registered ones, then those of the registered
    golden gates (closes both registries)."""
    return (*REGRESSION_GATES.entries(), *(change_gate(gate) for gate in diff_gates()))


def regression_gate(name: str) -> RegressionGate | None:
    """The diff gate called `name` (None: there is none)."""
    return next((gate for gate in regression_gates() if gate.name == name), None)


def extension_regression_gates() -> tuple[str, ...]:
    """The diff gates that are decflow's own (left out of the hash when unset)."""
    return tuple(gate.name for gate in regression_gates() if not gate.core)


class RegressionGates(StrictModel):
    """The diff gates of one level (the model is built from the registry:
    `regression_model()`)."""


class Regression(RegressionGates):
    """The `regression` section: its top-level gates are requirements, `warnings` the same
    gates as warnings."""

    warnings: RegressionGates = Field(default_factory=RegressionGates)
    segment_by: UniqueTexts = Field(default_factory=empty_list)
    min_segment_size: int = Field(default=5, ge=1)
    # decflow extension; left out of the canonical JSON when unset (DecGuard's hash).
    gating: Gating | None = None

    def limit(self, level: str, gate: str) -> float | None:
        """The limit of diff gate `gate` at `level` (requirement, warning); None: unset."""
        found = getattr(self if level == "requirement" else self.warnings, gate, None)
        return None if found is None else float(found)


@lru_cache(maxsize=1)
def regression_model() -> type[Regression]:
    """The `regression` section's model: one optional limit per diff gate at both levels
    (closes the registries)."""
    fields: dict[str, Any] = {gate.name: (gate.limit | None, None)
                              for gate in regression_gates()}
    gates = built(create_model("RegressionGates", __base__=RegressionGates,
                               __module__=__name__, **fields))
    return create_model("Regression", __base__=Regression, __module__=__name__,
                        warnings=(gates, Field(default_factory=gates)), **fields)


@dataclass(frozen=True)
class ProductionGate:
    """A production gate (`production.requirements.<name>`, `…warnings…`, and per segment
    unless it is a drift gate) as every part of decflow knows it: the type of its limit, the
    metric it reads and the comparison that must hold. `path`: where the metric sits in a
    check's metrics (None: a drift metric, measured against the baseline: aggregate only);
    evidence gating judges a count over records by exact bounds (`rate`: section, rate key,
    count key), other metrics by their own tests (`gates.production_evidence`: Brier and
    NLL by their sums, ECE and the drift distances against their noise floors). `core` and
    `checked` as for golden gates."""

    name: str
    limit: Any
    metric: str
    comparison: Comparison
    path: tuple[str, str] | None = None
    rate: RateOf | None = None
    core: bool = True
    checked: bool = True

    @property
    def drift(self) -> bool:
        return self.path is None


PRODUCTION_GATES: Registry[ProductionGate] = Registry("production gate",
                                                      lambda entry: entry.name)
for _production in (
    ProductionGate("min_accuracy", Unit, "accuracy", ">=", ("outcomes", "accuracy"),
                   rate=RateOf("outcomes", "accuracy", "n")),
    ProductionGate("max_error_rate", Unit, "error_rate", "<=", ("outcomes", "error_rate"),
                   rate=RateOf("outcomes", "error_rate", "n")),
    ProductionGate("max_ece", Unit, "ece", "<=", ("calibration", "ece")),
    ProductionGate("max_brier", UpToTwo, "brier", "<=", ("calibration", "brier")),
    ProductionGate("max_nll", NonNegative, "nll", "<=", ("calibration", "nll")),
    ProductionGate("min_threshold_coverage", Unit, "threshold_coverage", ">=",
                   ("threshold", "coverage"), rate=RateOf("threshold", "coverage", "n")),
    ProductionGate("max_abstention_rate", Unit, "abstention_rate", "<=",
                   ("routing", "abstention_rate"),
                   rate=RateOf("routing", "abstention_rate", "n_actions")),
    ProductionGate("max_fallback_rate", Unit, "fallback_rate", "<=",
                   ("routing", "fallback_rate"),
                   rate=RateOf("routing", "fallback_rate", "n_fallback")),
    # drift gates: they compare with `--baseline`, so they make no sense per segment
    ProductionGate("max_confidence_tv_distance", Unit, "confidence_tv_distance", "<="),
    ProductionGate("max_accuracy_drop", Unit, "accuracy_drop", "<="),
    ProductionGate("max_ece_increase", Unit, "ece_increase", "<="),
    # decflow: evidence-gated SmoothECE, judged by its own checks (`gates.calibration`)
    ProductionGate("max_smooth_ece", SmoothEceLimit, "smooth_ece", "<=", core=False,
                   checked=False),
):
    PRODUCTION_GATES.register(_production)


class ProductionGates(StrictModel):
    """A production gate section (`requirements`, `warnings`, or their `segment_` forms: no
    drift gate); the models are `production_model()`'s, built from the registry."""

    def limit(self, name: str) -> float | None:
        """The limit the section sets for gate `name` (None: unset or not a gate of it)."""
        found = getattr(self, name, None)
        return None if found is None else float(found)


def production_gate(name: str) -> ProductionGate:
    return PRODUCTION_GATES.get(name)


def extension_production_gates() -> tuple[str, ...]:
    """The production gates that are decflow's own (left out of the hash when unset)."""
    return tuple(entry.name for entry in PRODUCTION_GATES.entries() if not entry.core)


class Production(StrictModel):
    segments: UniqueTexts = Field(default_factory=empty_list)
    requirements: ProductionGates = Field(default_factory=ProductionGates)
    warnings: ProductionGates = Field(default_factory=ProductionGates)
    segment_requirements: ProductionGates = Field(default_factory=ProductionGates)
    segment_warnings: ProductionGates = Field(default_factory=ProductionGates)
    # decflow extension; left out of the canonical JSON when unset (DecGuard's hash). Unset,
    # `check` gates by evidence when the contract uses any decflow extension, else by point.
    gating: Gating | None = None


@lru_cache(maxsize=1)
def production_model() -> type[Production]:
    """The `production` section's model: every registered production gate in `requirements`
    and `warnings`, the gates that are not drift gates per segment (closes the registry)."""
    entries = PRODUCTION_GATES.entries()
    every: dict[str, Any] = {entry.name: (entry.limit | None, None) for entry in entries}
    per_segment = {name: field for name, field in every.items()
                   if not production_gate(name).drift}
    gates = built(create_model("ProductionGates", __base__=ProductionGates,
                               __module__=__name__, **every))
    segment = built(create_model("ProductionSegmentGates", __base__=ProductionGates,
                                 __module__=__name__, **per_segment))
    return create_model(
        "Production", __base__=Production, __module__=__name__,
        requirements=(gates, Field(default_factory=gates)),
        warnings=(gates, Field(default_factory=gates)),
        segment_requirements=(segment, Field(default_factory=segment)),
        segment_warnings=(segment, Field(default_factory=segment)))
