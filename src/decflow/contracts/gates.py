"""Gate sections: golden `requirements`/`warnings`, `regression` and `production` gates.

Field order is the fixed check order of the reference (gates are evaluated in table order).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from decflow.contracts.base import NonNegative, StrictModel, UniqueTexts, Unit, UpToTwo

# `regression.gating`: how a diff judges its gates. `evidence` (decflow): tri-state verdicts
# from paired, case-clustered intervals; `point` (DecGuard 0.1): the observed difference.
Gating = Literal["evidence", "point"]

# Golden gates that are only meaningful with `evaluation.confidence_threshold`.
THRESHOLD_GATES = ("min_coverage", "max_abstention_rate", "min_selective_accuracy")

# decflow's own gates among DecGuard's: left out of the canonical JSON when unset, so a
# DecGuard 0.1 contract hashes as before. SmoothECE's limit starts at 0.01, the finest
# bandwidth the production check's merged grid resolves (decflow.metrics.smooth_ece).
EXTENSION_GATES = ("max_smooth_ece",)
SmoothEceLimit = Annotated[float, Field(ge=0.01, lt=1.0)]


class GoldenGates(StrictModel):
    min_accuracy: Unit | None = None
    min_macro_f1: Unit | None = None
    max_nll: NonNegative | None = None
    max_brier: UpToTwo | None = None
    max_ece: Unit | None = None
    min_coverage: Unit | None = None
    max_abstention_rate: Unit | None = None
    min_selective_accuracy: Unit | None = None
    max_error_rate: Unit | None = None
    max_latency_p95_ms: NonNegative | None = None
    max_ordinal_mae: NonNegative | None = None
    max_smooth_ece: SmoothEceLimit | None = None  # decflow: evidence-gated SmoothECE


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


class ProductionSegmentGates(StrictModel):
    min_accuracy: Unit | None = None
    max_error_rate: Unit | None = None
    max_ece: Unit | None = None
    max_brier: UpToTwo | None = None
    max_nll: NonNegative | None = None
    min_threshold_coverage: Unit | None = None
    max_abstention_rate: Unit | None = None
    max_fallback_rate: Unit | None = None


class ProductionGates(ProductionSegmentGates):
    # Drift gates: they compare with `--baseline`, so they make no sense per segment.
    max_confidence_tv_distance: Unit | None = None
    max_accuracy_drop: Unit | None = None
    max_ece_increase: Unit | None = None
    max_smooth_ece: SmoothEceLimit | None = None  # decflow: evidence-gated SmoothECE


class Production(StrictModel):
    segments: UniqueTexts = Field(default_factory=list)
    requirements: ProductionGates = Field(default_factory=ProductionGates)
    warnings: ProductionGates = Field(default_factory=ProductionGates)
    segment_requirements: ProductionSegmentGates = Field(default_factory=ProductionSegmentGates)
    segment_warnings: ProductionSegmentGates = Field(default_factory=ProductionSegmentGates)
    # decflow extension; left out of the canonical JSON when unset (DecGuard's hash). Unset,
    # `check` gates by evidence when the contract uses any decflow extension, else by point.
    gating: Gating | None = None
