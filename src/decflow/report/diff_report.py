"""A diff of two contract runs (`decflow diff`) as typed models: `DiffReport`, and
`DiffView`, what the views read, which DecGuard's diff reports satisfy too: the two runs
it compares, its counts, shift, metric changes, segments, calibration and evidence
sections (`decflow.report.model` has the machinery and what every report kind shares; a
diff of two check runs is a `CheckReport`). The changed cases stay plain JSON (`PerCase`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from decflow.gates.checks import Verdict
from decflow.report.model import (
    BackendRef,
    ContractRef,
    Count,
    DatasetRef,
    ExitCode,
    NoiseFloor,
    Number,
    Open,
    PerCase,
    Report,
)


class SideCache(Open):
    """How one side of a diff used the call cache (`RunReport.call_cache`, in short)."""

    mode: str = "off"
    requests_sent: Count | None = None
    served_from_cache: Count = 0


class DiffSide(Open):
    """One of the two runs a diff compares."""

    path: str | None = None
    created_at: str | None = None
    mode: str | None = None
    contract_hash: str | None = None
    dataset: DatasetRef | None = None
    backend: BackendRef | None = None
    # decflow/4, when either run used the call cache: its mode and the answers it served
    call_cache: SideCache | None = Field(default=None, exclude_if=lambda v: v is None)


class DiffCounts(Open):
    """How the two runs' cases matched and changed (`metrics.regression.diff_results`)."""

    baseline_cases: Count
    candidate_cases: Count
    matched: Count
    only_in_baseline: Count
    only_in_candidate: Count
    compared: Count
    answer_flips: Count
    newly_wrong: Count
    newly_correct: Count
    newly_errored: Count
    recovered: Count
    still_errored: Count


class DiffShift(Open):
    """How the answers moved over the cases both runs decided."""

    answer_flip_rate: Number | None
    mean_tv_distance: Number | None
    max_tv_distance: Number | None
    mean_js_divergence: Number | None
    mean_confidence_delta: Number | None
    mean_abs_confidence_delta: Number | None
    max_abs_confidence_delta: Number | None


class MetricChange(Open):
    """One golden metric of both runs and its change (candidate − baseline)."""

    baseline: Number | None
    candidate: Number | None
    delta: Number | None


class DiffSegment(Open):
    """The accuracy of both runs on the cases of one `key=value` segment."""

    key: str
    value: str
    matched: Count
    compared: Count
    baseline_accuracy: Number | None
    candidate_accuracy: Number | None
    accuracy_drop: Number | None
    answer_flip_rate: Number | None
    gated: bool


class SideEce(Open):
    ece: Number | None
    noise_floor: NoiseFloor | None


class EceIncreaseGate(Open):
    """A `max_ece_increase` limit and whether the increase's noise floor alone crosses it."""

    gate: str
    level: str
    limit: Number
    noise_dominated: bool


class DiffCalibration(Open):
    """Each run's binned ECE with its noise floor, and the floor of the increase
    (`metrics.calibration.diff_calibration`)."""

    baseline: SideEce | None = None
    candidate: SideEce | None = None
    increase_noise_floor: NoiseFloor | None = None
    gates: list[EceIncreaseGate] = Field(default_factory=list)


class RerunNoise(Open):
    """The rerun noise the diff was judged against (`measured`), or how to measure it."""

    measured: bool
    advice: str | None = None
    sources: list[str] = Field(default_factory=list)
    cases: Count | None = None
    pairs: Count | None = None
    flip_rate: Number | None = None
    mean_tv_distance: Number | None = None


class GateDecision(Open):
    """The evidence on one configured diff gate (`gates.regression.GateEvidence`)."""

    gate: str
    level: str
    phrase: str
    method: str | None = None
    n: Count | None = None
    mcnemar_p: Number | None = None


class DiffEvidence(Open):
    """How the diff was gated and why, its rerun noise, and each gate's decision."""

    gating: str
    why: str
    noise: RerunNoise | None = None
    gates: list[GateDecision] = Field(default_factory=list)


class DiffView(Report):
    """What the views read of a diff report: its counts, shift, metric changes and segments
    (typed: a misspelled key is a type error), and what a decflow diff adds (the two runs,
    changed cases, calibration and evidence; each absent in reports written before it
    existed); DecGuard 0.1's diff reports carry the first four only."""

    counts: DiffCounts
    shift: DiffShift
    metrics: dict[str, MetricChange]
    segments: list[DiffSegment]
    same_dataset: bool | None = None
    baseline: DiffSide | None = None
    candidate: DiffSide | None = None
    changes: PerCase = Field(default_factory=list)
    calibration: DiffCalibration | None = None
    evidence: DiffEvidence | None = None
    gates_from: str | None = None


class DiffReport(DiffView):
    """`decflow diff` of two contract runs (a diff of two check runs is a `CheckReport`)."""

    kind: Literal["diff"]
    status: Verdict
    exit_code: ExitCode
    contract: ContractRef
    baseline: DiffSide
    candidate: DiffSide
    same_dataset: bool
    changes: PerCase
