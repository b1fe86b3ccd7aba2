"""Gate sections: golden `requirements`/`warnings`, `regression` and `production` gates.

Golden gates are a registry (`GOLDEN_GATES`): each entry declares its contract field, the
metric it reads, its comparison, its evidence and how a sequential run tracks it, and the
whole of decflow (contract model, checks, evidence, `--plan`, sequential runs, report
verification) reads it there; a gate registered before the first contract is read (an
extension's, a test's) is a gate like the built-ins. Field order is the fixed check order
of the reference (gates are evaluated in table order).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from decflow.contracts.base import NonNegative, StrictModel, UniqueTexts, Unit, UpToTwo
from decflow.registry import Registry

# `regression.gating`: how a diff judges its gates. `evidence` (decflow): tri-state verdicts
# from paired, case-clustered intervals; `point` (DecGuard 0.1): the observed difference.
Gating = Literal["evidence", "point"]

# decflow's own gates among DecGuard's: left out of the canonical JSON when unset, so a
# DecGuard 0.1 contract hashes as before. SmoothECE's limit starts at 0.01, the finest
# bandwidth the production check's merged grid resolves (decflow.metrics.smooth_ece).
SmoothEceLimit = Annotated[float, Field(ge=0.01, lt=1.0)]
Comparison = Literal[">=", "<="]


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
      `Composite` of a gate no per-case ratio decides (ECE, macro-F1, latency p95).
    - `rate`: a count over cases: exact binomial evidence beside its verdict.
    - `core`: one of DecGuard's (hashed as null when unset); otherwise a decflow extension,
      left out of the hash when unset and listed by `decflow_extensions`.
    - `needs_threshold` (only with `evaluation.confidence_threshold`), `score_only` (score
      decisions), `checked` (False: judged by its own checks, as `max_smooth_ece`).
    - `diff`: the regression gate on the same metric (`regression.<diff>`: its increase,
      candidate − baseline, at most the limit), for an extension gate."""

    name: str
    limit: Any
    metric: str
    comparison: Comparison
    metric_path: tuple[str, str] | None = None
    per_case: str | None = None
    composite: str | None = None
    binary: bool = False
    rate: RateOf | None = None
    core: bool = True
    needs_threshold: bool = False
    score_only: bool = False
    checked: bool = True
    diff: str | None = None

    @property
    def path(self) -> tuple[str, str]:
        """Where the gate's metric sits in a run's metrics."""
        return self.metric_path or ("extensions", self.metric)


_CASES = "decflow.metrics.golden_cases"
_COMPOSITE = "decflow.metrics.sequential_composite"
# Registration order is the order checks are listed in (DecGuard's table order first).
GOLDEN_GATES: Registry[GoldenGate] = Registry("golden gate", lambda entry: entry.name)
for _gate in (
    GoldenGate("min_accuracy", Unit, "accuracy", ">=", ("classification", "accuracy"),
               per_case=f"{_CASES}:accuracy", rate=RateOf("classification", "accuracy", "n")),
    GoldenGate("min_macro_f1", Unit, "macro_f1", ">=", ("classification", "macro_f1"),
               composite=f"{_COMPOSITE}:macro_f1_of"),
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
               needs_threshold=True),
    GoldenGate("max_error_rate", Unit, "error_rate", "<=", ("counts", "error_rate"),
               per_case=f"{_CASES}:error_rate", binary=True,
               rate=RateOf("counts", "error_rate", "total")),
    GoldenGate("max_latency_p95_ms", NonNegative, "latency_p95_ms", "<=", ("latency", "p95_ms"),
               composite=f"{_COMPOSITE}:latency_p95_of"),
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
    """The golden gates that also gate a diff (`regression.<diff>`: the increase of their
    metric, candidate − baseline), in gate order."""
    return tuple(entry for entry in GOLDEN_GATES.entries() if entry.diff is not None)


class RegressionGates(StrictModel):
    max_answer_flip_rate: Unit | None = None
    max_accuracy_drop: Unit | None = None
    max_macro_f1_drop: Unit | None = None
    max_ece_increase: Unit | None = None
    max_brier_increase: UpToTwo | None = None
    max_nll_increase: NonNegative | None = None
    max_mean_tv_distance: Unit | None = None
    max_mean_confidence_shift: Unit | None = None
    max_error_rate_increase: Unit | None = None
    max_latency_p95_increase_ms: NonNegative | None = None
    max_segment_accuracy_drop: Unit | None = None


class Regression(RegressionGates):
    warnings: RegressionGates = Field(default_factory=RegressionGates)
    segment_by: UniqueTexts = Field(default_factory=list)
    min_segment_size: int = Field(default=5, ge=1)
    # decflow extension; left out of the canonical JSON when unset (DecGuard's hash).
    gating: Gating | None = None

    def limit(self, level: str, gate: str) -> float | None:
        """The limit of diff gate `gate` at `level` (requirement, warning); None: unset."""
        found = getattr(self if level == "requirement" else self.warnings, gate, None)
        return None if found is None else float(found)


@lru_cache(maxsize=1)
def regression_model() -> type[Regression]:
    """The `regression` section's model: DecGuard's gates, then the diff gates of the
    registered golden gates (decflow extensions, at both levels)."""
    extra: dict[str, Any] = {gate.diff: (gate.limit | None, None) for gate in diff_gates()
                             if gate.diff is not None}
    if not extra:
        return Regression
    gates = create_model("RegressionGates", __base__=RegressionGates, __module__=__name__,
                         **extra)
    return create_model("Regression", __base__=Regression, __module__=__name__,
                        warnings=(gates, Field(default_factory=gates)), **extra)


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
    segments: UniqueTexts = Field(default_factory=list)
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
    gates = create_model("ProductionGates", __base__=ProductionGates, __module__=__name__,
                         **every)
    segment = create_model("ProductionSegmentGates", __base__=ProductionGates,
                           __module__=__name__, **per_segment)
    return create_model(
        "Production", __base__=Production, __module__=__name__,
        requirements=(gates, Field(default_factory=gates)),
        warnings=(gates, Field(default_factory=gates)),
        segment_requirements=(segment, Field(default_factory=segment)),
        segment_warnings=(segment, Field(default_factory=segment)))
