"""The typed report models: what a report is, for the code that builds one and the code
that reads one.

Every report kind is a `Report`: what it is about (contract, dataset, backend, health,
evaluation), its verdict (status, exit code, headline) and checks, the parts every view
reads (`Report.view`). A kind's model narrows it: `RunReport` (`report/run_report.py`),
`CheckReport` (`report/check_report.py`), `DiffReport` (`report/diff_report.py`). The
stage that writes a report builds its model and writes its `to_dict()`; loading validates a
report file into one (`read`). The models live in `report/`, below `pipeline/` (the
builders) and `views/` (the readers), so both import them and neither imports the other.

A report file is untrusted input: hand-edited, truncated, or written by another tool. The
models are strict (a number is a finite JSON number, not the string "0.5" or a 400-digit
integer), so a malformed file ends as one `ReportError` naming the field, never as a
traceback from deep inside a view. Unknown fields are allowed and kept: DecGuard 0.1 and
older decflow reports differ, newer decflow versions may add some. Per-case lists (results,
failures, changed cases) stay plain JSON (`PerCase`).

A model writes back exactly the keys it was given, in the order given (built or read):
the JSON a stage writes is the one its builder spelled, and a report read and written
again keeps its bytes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    SkipValidation,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from decflow.contracts.problems import describe, problems_from
from decflow.errors import ReportError
from decflow.gates.checks import Check, CheckStatus, Level, Verdict
from decflow.gates.headline import Qualifier, headline
from decflow.untrusted import quote

SHOWN_PROBLEMS = 5
REWRITE = "write it again from its run (`decflow report RUN -o FILE`)"
# The advice for a run's own stored report (REWRITE would be circular): judging the run again
# reads only its stored numbers.
REJUDGE = "judge the run again from its stored numbers: `decflow report {run} -c CONTRACT`"


def _finite_number(value: object) -> int | float:
    """A JSON number as written: an integer stays an integer (so a report read and written
    again keeps `0`, not `0.0`), a float must be finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {describe(value)}")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValueError(f"must be a finite number, got {describe(value)} (too large for a float)")
    if isinstance(value, float) and value - value != 0.0:
        raise ValueError(f"must be a finite number, got {quote(value)}")
    return value


Number = Annotated[int | float, PlainValidator(_finite_number)]
Count = Annotated[int, Field(ge=0, lt=2**63)]
Bins = Annotated[int, Field(ge=1, le=10_000)]
ExitCode = Annotated[int, Field(ge=0, le=2)]
DecisionType = Literal["choice", "noul", "score"]
Input = str | dict[str, Any]
Presentation = list[Annotated[list[str], Field(min_length=2, max_length=2)]]  # [shown, label]


class Checked(BaseModel):
    """Strictly typed fields, unknown fields kept."""

    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)


# A list with an entry per case (results, failures, transformed cases) is plain JSON in the
# models: validating, copying and writing 100k typed cases would cost seconds of a run. A
# report read from a file has each entry checked against its item model (`per_case`).
PerCase = Annotated[list[dict[str, Any]], SkipValidation]
MaybePerCase = Annotated[list[dict[str, Any]] | None, SkipValidation]


class Open(Checked):
    """A report object, built by a stage or read from a file. `to_dict` writes exactly the
    keys it was given, in their order (a field set later follows them), the typed ones as
    their JSON and the rest as they are: no copy of a per-case list or unknown field."""

    _given: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, Open):
            model._given = tuple(data)
        return model

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if not name.startswith("_") and name not in self._given:
            self._given = (*self._given, name)

    def given(self) -> bool:
        """Whether it holds any key (a report's `{}` section shows nothing)."""
        return bool(self._given)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, as written to a report file."""
        values = {**self.__dict__, **(self.__pydantic_extra__ or {})}
        fields = type(self).model_fields
        written = {}
        for key in self._given:
            value = values[key]
            field = fields.get(key)
            if field is None or field.exclude_if is None or not field.exclude_if(value):
                written[key] = _json(value)
        return written

    @classmethod
    def per_case(cls) -> tuple[tuple[tuple[str, ...], TypeAdapter[Any]], ...]:
        """(path, item model) of each per-case list a file of this kind may carry."""
        return ()

    @classmethod
    def read(cls, document: dict[str, Any], source: str, what: str = "decflow report", *,
             advice: str = REWRITE, per_case: bool = True) -> Self:
        """`document` validated (its per-case lists too, unless `per_case` is False), or
        one `ReportError` naming `source` and each bad field."""
        problems = [problem for path, items in (cls.per_case() if per_case else ())
                    for problem in _item_problems(document, path, items)]
        try:
            model = cls.model_validate(document)
        except ValidationError as exc:
            problems = problems_from(exc, "") + problems
        if not problems:
            return model
        more = len(problems) - SHOWN_PROBLEMS
        listed = "\n".join(f"  {p}" for p in problems[:SHOWN_PROBLEMS])
        raise ReportError(
            f"{source}: not a valid {what} ({advice}):\n{listed}"
            + (f"\n  … and {more} more" if more > 0 else "")
        )


def _json(value: Any) -> Any:
    """A field's JSON: a model's `to_dict`, a list or mapping of models (typed fields hold
    only models, so the first entry tells), else the value as it is."""
    if isinstance(value, Open):
        return value.to_dict()
    if isinstance(value, list) and value and isinstance(value[0], Open):
        return [item.to_dict() for item in value]
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), Open):
        return {key: item.to_dict() for key, item in value.items()}
    return value


def _item_problems(document: dict[str, Any], path: tuple[str, ...],
                   items: TypeAdapter[Any]) -> list[str]:
    value: Any = document
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return []  # a missing section is the model's to report
        value = value[key]
    try:
        items.validate_python(value)
    except ValidationError as exc:
        return problems_from(exc, ".".join(path))
    return []


# -- identity: what a report is about ---------------------------------------------------


class ContractRef(Open):
    """The decision a report is about (a diff's names its gates' contract)."""

    name: str | None = None
    type: DecisionType | None = None
    labels: list[str] = []
    schema_version: str | None = None
    hash: str | None = None
    path: str | None = None


class DatasetRef(Open):
    """Where the golden cases (a run) or the production records (a check) came from."""

    path: str | None = None
    hash: str | None = None
    n_cases: Count | None = None
    n_labeled: Count | None = None
    n_records: Count | None = None
    partitions: Count | None = None


class BackendRef(Open):
    name: str | None = None
    provider: str | None = None
    model: str | None = None
    model_version: str | None = None
    details: dict[str, Any] | None = None


class Health(Open):
    status: str
    detail: str


class Evaluation(Open):
    confidence_threshold: Number | None = None
    calibration_bins: Bins | None = None
    probability_tolerance: Number | None = None
    max_concurrency: Count | None = None


class CheckRow(Open):
    """One gate's verdict (`decflow.gates.Check.to_dict`)."""

    gate: str
    level: Level
    metric: str
    comparison: str
    threshold: Number
    value: Number | None
    status: CheckStatus
    message: str
    evidence: dict[str, Any] | None = None

    def judged(self) -> Check:
        """The check as the gates hold it (its evidence typed)."""
        return Check.from_dict(self.to_dict())


class QualifierRow(Open):
    """What a reader must know about the verdict (`decflow.gates.headline.Qualifier`)."""

    name: str
    detail: str

    def qualifier(self) -> Qualifier:
        return Qualifier(self.name, self.detail)


class ArtifactRef(Open):
    uri: str | None = None
    path: str | None = None
    sha256: str | None = None
    rows: Count | None = None


class RunRef(Open):
    """The stored run a report belongs to."""

    id: str | None = None
    store: str | None = None
    regated_at: str | None = None
    artifacts: dict[str, ArtifactRef] | None = None


class Stability(Open):
    verdict: str
    flips: Count
    pairs: Count
    epsilon: Number
    flip_rate: Number | None = None
    ci_low: Number
    ci_high: Number
    mean_tv: Number | None = None
    note: str | None = None
    advice: str | None = None
    sources: dict[str, Count] | None = None
    n_cases: Count | None = None
    repeats: Count | None = None
    n_incomplete: Count | None = None


class Blindness(Open):
    summary: str | None = None
    blind: bool = False
    skew: Number | None = None
    modal_label: str | None = None
    distinct: Count | None = None
    n: Count | None = None
    threshold: Number | None = None
    # False: the contract has no blindness section, so the measure informs and gates nothing
    configured: bool = True


class Axis(Open):
    axis: str
    note: str | None = None
    attributable_rate: Number | None = None


class Counterfactual(Open):
    max_flip_rate: Number | None = None
    axes: list[Axis] = []
    score: Number | None = None


class NotExercised(Open):
    name: str
    reason: str


class Diagnostics(Open):
    stability: Stability | None = None
    blindness: Blindness | None = None
    guidance: str | None = None
    counterfactual: Counterfactual | None = None
    not_exercised: list[NotExercised] | None = None
    caveats: list[str] = []


# -- calibration beside the binned ECE (a run's and a check's `calibration`) ------------


class NoiseFloor(Open):
    """The binned ECE of a perfectly calibrated model at this n, by simulation."""

    median: Number
    p95: Number


class NoiseGate(Open):
    """An ECE limit and whether the noise floor alone could cross it."""

    gate: str
    level: str
    limit: Number
    noise_dominated: bool


class BinnedEce(Open):
    value: Number | None = None
    noise_floor: NoiseFloor | None = None
    gates: list[NoiseGate] = []


class SmoothEce(Open):
    value: Number | None = None
    below: Number | None = None  # when the estimate is under its resolution
    bandwidth: Number | None = None


class Corp(Open):
    """The CORP decomposition of the top-label Brier score."""

    brier: Number | None = None
    miscalibration: Number | None = None
    discrimination: Number | None = None
    uncertainty: Number | None = None


class Calibration(Open):
    n: Count | None = None
    binned_ece: BinnedEce | None = None
    smooth_ece: SmoothEce | None = None
    corp: Corp | None = None


class Report(Open):
    """What every report kind (run, check, diff, replay, probe) may carry and every view
    reads: its identity, verdict and checks. Each field is optional here; a kind's own
    model (`RunReport`) says which it must have."""

    report_version: str | None = None
    kind: str | None = None
    created_at: str | None = None
    mode: str | None = None
    status: Verdict | None = None
    exit_code: ExitCode | None = None
    headline: str | None = None
    # decflow/4: what the headline's qualifiers say (zero_limit, underpowered, …)
    qualifiers: list[QualifierRow] | None = Field(default=None, exclude_if=lambda v: not v)
    contract: ContractRef | None = None
    dataset: DatasetRef | None = None
    backend: BackendRef | None = None
    health: Health | None = None
    evaluation: Evaluation | None = None
    checks: list[CheckRow] = []
    # a contract run's; the views show its caveats with the verdict
    diagnostics: Diagnostics | None = None
    run: RunRef | None = None

    @classmethod
    def view(cls, document: dict[str, Any]) -> Report:
        """The shared parts of a report dict, as the views read them."""
        return cls.read(document, "the report")

    def first_line(self) -> str:
        """The report's first line: its own `headline` (decflow/3 on), else one made from its
        status and checks (older decflow and DecGuard reports)."""
        if self.headline:
            return self.headline
        return headline(self.status or "n/a", [c.judged() for c in self.checks],
                        qualifiers=[q.qualifier() for q in self.qualifiers or []])

    def failing_checks(self) -> list[CheckRow]:
        return [c for c in self.checks if c.status != "pass"]

    def caveats(self) -> list[str]:
        """What qualifies the verdict itself (a blind suite, an axis that changed nothing)."""
        return [] if self.diagnostics is None else self.diagnostics.caveats
