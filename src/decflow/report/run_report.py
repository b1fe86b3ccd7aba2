"""A contract run's report (`test`, `fuzz`, `test --all`, `stability`) as typed models:
`RunReport`, its golden metrics and sections, and the per-case items a report file is
checked against when read (`decflow.report.model` has the machinery and what every report
kind shares).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, TypeAdapter

from decflow.gates.checks import Verdict
from decflow.report.model import (
    ArtifactRef,
    BackendRef,
    Bins,
    Calibration,
    Checked,
    CheckRow,
    ContractRef,
    Count,
    DatasetRef,
    DecisionType,
    Diagnostics,
    Evaluation,
    ExitCode,
    Health,
    Input,
    MaybePerCase,
    Number,
    Open,
    PerCase,
    Presentation,
    QualifierRow,
    Report,
    RunRef,
)
from decflow.report.modes import ModeName

# -- a contract run's golden metrics (`decflow.metrics.golden_metrics`) ------------------


class Counts(Open):
    total: Count
    succeeded: Count
    errored: Count
    labeled: Count
    errors_by_kind: dict[str, Count] = Field(default_factory=dict)
    error_rate: Number | None = None


class Classification(Open):
    accuracy: Number | None
    macro_f1: Number | None
    # label → precision, recall, f1, support
    per_label: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ordinal_mae: Number | None = None  # score decisions


class CalibrationMetrics(Open):
    ece: Number | None
    brier: Number | None
    nll: Number | None
    bins: Count
    # one entry per bin: edges, count, accuracy
    reliability: list[dict[str, Any]] = Field(default_factory=list)


class Selective(Open):
    """Coverage and accuracy at the contract's confidence threshold."""

    threshold: Number
    coverage: Number | None
    abstention_rate: Number | None = None
    selective_accuracy: Number | None


class Latency(Open):
    mean_ms: Number | None
    p50_ms: Number | None
    p95_ms: Number | None
    max_ms: Number | None


class GoldenMetrics(Open):
    counts: Counts
    classification: Classification
    calibration: CalibrationMetrics
    selective: Selective | None = None
    latency: Latency
    # the metrics of the extension golden gates the contract sets (registered gates)
    extensions: dict[str, Number | None] | None = None


# -- a contract run's report ------------------------------------------------------------


class RunContract(ContractRef):
    name: str
    type: DecisionType
    labels: list[str] = Field(min_length=2)
    path: str
    hash: str | None


class RunDataset(DatasetRef):
    path: str
    hash: str | None


class RunBackend(BackendRef):
    name: str
    provider: str


class RunEvaluation(Evaluation):
    calibration_bins: Bins
    probability_tolerance: Number


class Result(Checked):
    case_id: str
    decision: str
    backend: str
    labels: list[str]
    probabilities: dict[str, Number]
    selected: str
    confidence: Number
    latency_ms: Number | None


class Error(Checked):
    kind: str
    message: str


class ResultItem(Checked):
    case_id: str
    input: Input
    expected: str | None = None
    result: Result | None
    error: Error | None


class Failure(Checked):
    case_id: str
    kind: str
    input: Input
    expected: str | None = None
    selected: str | None = None
    confidence: Number | None = None
    error: str | None = None


class PropertySummary(Open):
    property: str
    n_evaluated: Count
    n_violations: Count
    violation_rate: Number | None
    n_flips: Count
    flip_rate: Number | None
    max_tv_distance: Number | None
    n_errors: Count
    n_skipped: Count
    level: str | None = None
    relation: str = ""
    n_reduced: Count | None = None
    rerun_evidence: bool = False  # the identity property's re-asks: rerun evidence


class RateEvidence(Open):
    """A property rate gate's evidence, the case as unit (`gates.golden_evidence`)."""

    gate: str  # "<property>.<metric>"
    statement: str
    count: Count
    n: Count
    variants: Count | None = None
    rate: Number | None = None
    ci_low: Number | None = None
    ci_high: Number | None = None
    limit: Number | None = None


class Skipped(Checked):
    property: str
    case_id: str
    reason: str


class Reduced(Checked):
    input: Input
    backend_calls: Count
    presentation: Presentation | None = None


class PropertyCase(Checked):
    id: str
    input: Input
    error: Error | None = None
    violations: list[str] = Field(default_factory=list)
    presentation: Presentation | None = None
    reduced: Reduced | None = None


class Properties(Open):
    seed: int | str
    summaries: list[PropertySummary]
    rate_evidence: list[RateEvidence] = Field(default_factory=list)
    skipped: PerCase
    failures: MaybePerCase = None
    pairs: MaybePerCase = None  # DecGuard's: every transformed case
    n_failures: Count | None = None


class ModelIdentityRow(Open):
    verified: bool
    note: str
    reported: dict[str, Any] = Field(default_factory=dict)


class CallCacheUse(Open):
    """How a run used the call cache (`pipeline.contract_run.call_cache`)."""

    mode: str
    requests_sent: Count
    served_from_cache: Count
    backend_seconds_saved: Number
    price_per_call: Number | None = None
    money_saved: Number | None = None
    model_identity: ModelIdentityRow


class SequentialGate(Open):
    """One tracked gate of a sequential run (`pipeline/contract_run/sequential/gates.py`):
    its decision, the cases it used, estimate, interval and e-values; decflow/3 rows carry
    no interval label, promise or zero_limit note."""

    gate: str
    decision: str | None
    stop_reason: str
    cases_used: Count
    estimate: Number | None
    low: Number | None
    high: Number | None
    e_fail: Number
    e_pass: Number
    interval: str | None = None  # its label when it is not the run's time-uniform one
    contradicted: bool = False
    promise: str | None = None  # "model": a verdict about the model's rate, not the run
    zero_limit: str | None = None  # a limit-0 gate passed at `sequential.zero_limit`


class Sequential(Open):
    """A sequential run's section: calls made against the full suite's, why it stopped,
    what it saved, and each tracked gate (`sequential/summary.py`)."""

    alpha: Number
    alpha_per_gate: Number
    seed: int | str
    # what the seed was derived from (the call cache reads); absent: drawn or set
    seed_from: str | None = None
    batch: Count
    suite_cases: Count
    cases_sent: Count
    stop_reason: str
    calls_made: Count
    calls_full: Count
    calls_from_cache: Count | None = None  # absent: the call cache served nothing
    seconds_saved: Number | None
    price_per_call: Number | None = None
    money_saved: Number | None = None
    gates: list[SequentialGate]


class EvidenceFigures(Open):
    """A rate gate's interval at this n (`metrics.evidence.Evidence.to_dict`)."""

    n: Count
    estimate: Number | None = None
    low: Number | None = None
    high: Number | None = None
    cases_needed: Count | None = None
    notes: list[str] = Field(default_factory=list)


class GoldenGateEvidence(Open):
    """How far a golden rate gate's point verdict can be trusted (`gate_evidence`)."""

    gate: str
    limit: Number
    evidence: EvidenceFigures


class RunView(Report):
    """What the views read of a contract run's report (typed: a misspelled key is a type
    error); every section but the mode may be missing from a report file given to a view."""

    mode: ModeName
    metrics: GoldenMetrics | None = None
    calibration: Calibration | None = None
    gate_evidence: list[GoldenGateEvidence] | None = None
    failures: PerCase = Field(default_factory=list)
    results: PerCase = Field(default_factory=list)
    properties: Properties | None = None
    sequential: Sequential | None = Field(default=None, exclude_if=lambda v: v is None)
    call_cache: CallCacheUse | None = Field(default=None, exclude_if=lambda v: v is None)


class RunReport(RunView):
    """A contract run's report (`test`, `fuzz`, `test --all`, `stability`): decflow/1-3 and
    DecGuard 0.1 alike."""

    report_version: str
    decflow_version: str | None = None
    mode: ModeName
    status: Verdict
    exit_code: ExitCode
    contract: RunContract
    dataset: RunDataset
    backend: RunBackend
    evaluation: RunEvaluation
    requirements: dict[str, Any]
    warnings: dict[str, Any]
    metrics: GoldenMetrics
    calibration: Calibration | None = None
    gate_evidence: list[GoldenGateEvidence] | None = None
    checks: list[CheckRow]
    failures: PerCase
    results: PerCase
    properties: Properties | None = None
    # only a sequential run has the key
    sequential: Sequential | None = Field(default=None, exclude_if=lambda v: v is None)
    # decflow/4, only a run with the call cache on: requests sent, answers served
    call_cache: CallCacheUse | None = Field(default=None, exclude_if=lambda v: v is None)
    # decflow/4, a run with properties or diagnostics: the seed of the uniforms that round
    # per-case shares to 0/1 (`metrics.rounded_shares`); absent: Bentkus's bound judged them
    rounding_seed: int | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def per_case(cls) -> tuple[tuple[tuple[str, ...], TypeAdapter[Any]], ...]:
        return RUN_PER_CASE


RUN_PER_CASE: tuple[tuple[tuple[str, ...], TypeAdapter[Any]], ...] = (
    (("failures",), TypeAdapter(list[Failure])),
    (("results",), TypeAdapter(list[ResultItem])),
    (("properties", "skipped"), TypeAdapter(list[Skipped])),
    (("properties", "failures"), TypeAdapter(list[PropertyCase] | None)),
    (("properties", "pairs"), TypeAdapter(list[PropertyCase] | None)),
)


def build_validators() -> None:
    """Build the validators of a run report and of each section its builder (the contract
    run's summary) validates on its own: pydantic builds each on first use (`report.model`
    defers them), ≈0.03 CPU s for these, which a remote run can spend while it waits on its
    calls."""
    for model in (RunReport, RunView, QualifierRow, RunContract, RunDataset, RunBackend, Health,
                  RunEvaluation, GoldenMetrics, Calibration, GoldenGateEvidence, CheckRow,
                  Properties, Diagnostics, Sequential, CallCacheUse, RunRef, ArtifactRef):
        model.model_rebuild()

