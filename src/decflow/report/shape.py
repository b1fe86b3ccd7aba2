"""The shape a run report file must have before it is verified and shown.

A report file is untrusted input: hand-edited, truncated, or written by another tool. These
models check the types of every field the verifier and the text view read (strictly: a
number is a finite JSON number that fits a float, not the string "0.5" or a 400-digit
integer), so a malformed file ends as one `ReportError` naming the field, never as a
traceback from deep inside a view. Unknown fields are allowed: DecGuard 0.1 and decflow
reports differ, and newer decflow versions may add some.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from decflow.contracts.problems import problems_from
from decflow.report.modes import ModeName

Number = Annotated[float, Field(allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, lt=2**63)]
Input = str | dict[str, Any]
Presentation = list[Annotated[list[str], Field(min_length=2, max_length=2)]]  # [shown, label]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Contract(_Open):
    name: str
    type: Literal["choice", "noul", "score"]
    labels: list[str] = Field(min_length=2)
    path: str
    hash: str | None


class _Dataset(_Open):
    path: str
    hash: str | None


class _Backend(_Open):
    name: str
    provider: str
    model: str | None = None


class _Health(_Open):
    status: str
    detail: str


class _Evaluation(_Open):
    confidence_threshold: Number | None = None
    calibration_bins: Annotated[int, Field(ge=1, le=10_000)]
    probability_tolerance: Number


class _Result(_Open):
    case_id: str
    decision: str
    backend: str
    labels: list[str]
    probabilities: dict[str, Number]
    selected: str
    confidence: Number
    latency_ms: Number | None


class _Error(_Open):
    kind: str
    message: str


class _ResultItem(_Open):
    case_id: str
    input: Input
    expected: str | None = None
    result: _Result | None
    error: _Error | None


class _Check(_Open):
    gate: str
    level: Literal["requirement", "warning"]
    metric: str
    comparison: str
    threshold: Number
    value: Number | None
    status: Literal["pass", "warn", "fail", "not_established"]
    message: str
    evidence: dict[str, Any] | None = None


class _Failure(_Open):
    case_id: str
    kind: str
    input: Input
    expected: str | None = None
    selected: str | None = None
    confidence: Number | None = None
    error: str | None = None


class _Summary(_Open):
    property: str
    n_evaluated: Count
    n_violations: Count
    violation_rate: Number | None
    n_flips: Count
    flip_rate: Number | None
    max_tv_distance: Number | None
    n_errors: Count
    n_skipped: Count


class _Skipped(_Open):
    property: str
    case_id: str
    reason: str


class _Reduced(_Open):
    input: Input
    backend_calls: Count
    presentation: Presentation | None = None


class _PropertyCase(_Open):
    id: str
    input: Input
    error: _Error | None = None
    violations: list[str] = []
    presentation: Presentation | None = None
    reduced: _Reduced | None = None


class _Properties(_Open):
    seed: int | str
    summaries: list[_Summary]
    skipped: list[_Skipped]
    failures: list[_PropertyCase] | None = None
    pairs: list[_PropertyCase] | None = None
    n_failures: Count | None = None


class _Stability(_Open):
    verdict: str
    flips: Count
    pairs: Count
    epsilon: Number
    flip_rate: Number | None = None
    ci_low: Number
    ci_high: Number
    mean_tv: Number | None = None
    note: str | None = None
    sources: dict[str, Count] | None = None


class _Blindness(_Open):
    summary: str | None = None
    skew: Number | None = None
    modal_label: str | None = None
    threshold: Number | None = None


class _Axis(_Open):
    axis: str
    note: str | None = None
    attributable_rate: Number | None = None


class _Counterfactual(_Open):
    max_flip_rate: Number | None = None
    axes: list[_Axis] = []
    score: Number | None = None


class _NotExercised(_Open):
    name: str
    reason: str


class _Diagnostics(_Open):
    stability: _Stability | None = None
    blindness: _Blindness | None = None
    guidance: str | None = None
    counterfactual: _Counterfactual | None = None
    not_exercised: list[_NotExercised] | None = None
    caveats: list[str] = []


class _Artifact(_Open):
    path: str | None = None
    rows: Count | None = None
    sha256: str | None = None


class _Run(_Open):
    id: str | None = None
    artifacts: dict[str, _Artifact] | None = None


class _RunReport(_Open):
    mode: ModeName
    status: Literal["pass", "warn", "fail"]
    headline: str | None = None
    exit_code: Annotated[int, Field(ge=0, le=2)]
    contract: _Contract
    dataset: _Dataset
    backend: _Backend
    health: _Health | None = None
    evaluation: _Evaluation
    requirements: dict[str, Any]
    warnings: dict[str, Any]
    metrics: dict[str, Any]
    checks: list[_Check]
    failures: list[_Failure]
    results: list[_ResultItem]
    properties: _Properties | None = None
    diagnostics: _Diagnostics | None = None
    run: _Run | None = None


def shape_problems(report: dict[str, Any]) -> list[str]:
    """`field.path: what is wrong` for each field of a run report with the wrong type."""
    try:
        _RunReport.model_validate(report)
    except ValidationError as exc:
        return problems_from(exc, "")
    return []
