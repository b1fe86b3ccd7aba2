"""Production record rules: the schema of a normalized record and the strict per-record
parser that decides (and words) what is wrong with a record.

Rules are DecGuard 0.1's record table. Differences, on purpose: `null` counts as "not
given" for every optional field (DecGuard rejects `metadata: null`), and booleans are
never accepted where numbers belong (DecGuard's lax parsing takes `latency_ms: true`).
"""

from __future__ import annotations

import ast
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.data.bounds import MAX_JSON_VALUES, MAX_RECORD_FIELD_BYTES
from decflow.data.records.bytes import nesting_problem
from decflow.strictjson import unique_keys, values_over
from decflow.textfile import TextProblem, utf8_size
from decflow.untrusted import quote

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

RECORD_FIELDS = (
    "id",
    "timestamp",
    "decision",
    "input",
    "probabilities",
    "selected",
    "confidence",
    "backend",
    "model",
    "model_version",
    "outcome",
    "outcome_correct",
    "latency_ms",
    "cost",
    "action",
    "fallback",
    "metadata",
)
ACTIONS = ("accept", "abstain", "fallback", "human_review")
STRING_FIELDS = ("id", "timestamp", "decision", "backend", "model", "model_version", "action")
NUMBER_FIELDS = ("confidence", "latency_ms", "cost")
BOOL_FIELDS = ("outcome_correct", "fallback")
NO_TIMEZONE = "timestamp: must include a timezone"
_NOT_ISO = "timestamp: must be an ISO 8601 timestamp"


def segment_column(key: str) -> str:
    """Column of the normalized table holding the segment token of `metadata[key]`."""
    return f"segment:{key}"


def record_schema(labels: Sequence[str], segments: Sequence[str]) -> dict[str, pl.DataType]:
    """Columns of the normalized `records` table, in order.

    `position` is the 1-based record number across all partitions; `input_text` or
    `input_json` holds the input; `probabilities` is a struct with one field per label in
    contract order; `outcome_correct` is derived from `outcome` when that is given;
    `segment:<key>` holds a type-tagged token of `metadata[key]` (see `segment_token`).
    """
    schema: dict[str, pl.DataType] = {
        "position": pl.Int64(),
        "id": pl.String(),
        "timestamp": pl.Datetime("us", "UTC"),
        "input_text": pl.String(),
        "input_json": pl.String(),
        "probabilities": pl.Struct({label: pl.Float64() for label in labels}),
        "selected": pl.String(),
        "confidence": pl.Float64(),
        "backend": pl.String(),
        "model": pl.String(),
        "model_version": pl.String(),
        "outcome": pl.String(),
        "outcome_correct": pl.Boolean(),
        "latency_ms": pl.Float64(),
        "cost": pl.Float64(),
        "action": pl.String(),
        "fallback": pl.Boolean(),
        "metadata_json": pl.String(),
    }
    for key in segments:
        schema[segment_column(key)] = pl.String()
    return schema


@dataclass(frozen=True)
class RecordSpec:
    """What validation needs from the contract."""

    decision: str
    labels: tuple[str, ...]
    tolerance: float
    segments: tuple[str, ...] = ()

    @classmethod
    def from_contract(cls, contract: Contract) -> RecordSpec:
        return cls(
            decision=contract.decision.name,
            labels=tuple(contract.decision.labels),
            tolerance=float(contract.evaluation.probability_tolerance),
            segments=tuple(key.strip() for key in contract.production.segments),
        )

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return record_schema(self.labels, self.segments)


class RecordInvalid(Exception):
    """One record breaks a rule; the message is completed with file and line."""


# -- segment tokens --------------------------------------------------------------------------

MISSING_TOKEN = "NoneType:"


def segment_token(value: Any) -> str:
    """`<type name>:<repr>`: groups are distinct by type (1, "1" and true are three groups)
    and tokens sort by type name then repr, as DecGuard orders segments (missing first)."""
    if value is None:
        return MISSING_TOKEN
    return f"{type(value).__name__}:{value!r}"


def segment_value(token: str) -> Any:
    """The JSON value a token stands for (None for a missing key)."""
    kind, _, text = token.partition(":")
    if kind == "NoneType":
        return None
    if kind == "float":
        return float(text)
    # str, int and bool reprs are Python literals
    return ast.literal_eval(text)


def segment_display(token: str) -> str:
    """How a segment value is shown in check names: `str(value)`, `<missing>` if absent."""
    return shown_segment_value(segment_value(token))


def shown_segment_value(value: Any) -> str:
    """`segment_display` of a value (as a report stores it)."""
    return "<missing>" if value is None else str(value)


INVALID_SEGMENT = "invalid:"
NOT_SCALAR = "must be a string, number, boolean or null when used as a segment"
NOT_FINITE = "must be finite"


def segment_problem(value: Any) -> str | None:
    """Why a metadata value cannot be a segment value (None when it can). Like DecGuard,
    these are reported only once every record is otherwise valid, so the column carries
    `invalid:<reason>` instead of a token and the reader decides when to raise."""
    if isinstance(value, dict | list):
        return NOT_SCALAR
    if isinstance(value, float) and not math.isfinite(value):
        return NOT_FINITE
    return None


# -- the strict per-record parser ------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: int | float) -> bool:
    """`math.isfinite` that calls an integer too large for a double (400 digits) infinite."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def parse_timestamp(text: str) -> datetime:
    """ISO 8601 with a timezone (`Z` allowed); raises `RecordInvalid` otherwise."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise RecordInvalid(f"invalid production record:\n  {_NOT_ISO}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise RecordInvalid(f"invalid production record:\n  {NO_TIMEZONE}")
    return parsed


def _field_problems(obj: dict[str, Any]) -> list[str]:
    problems = [f"{k}: unknown field (check the spelling)" for k in obj if k not in RECORD_FIELDS]
    for name in ("decision", "probabilities", "selected"):
        if obj.get(name) is None:
            problems.append(f"{name}: required field is missing")
    for name in STRING_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], str):
            problems.append(f"{name}: must be a string")
    if obj.get("id") == "":
        problems.append("id: must be a non-empty string")
    for name in ("selected", "outcome"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str) and not (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            problems.append(f"{name}: must be a string (integers are converted)")
    for name in NUMBER_FIELDS:
        value = obj.get(name)
        if value is None:
            continue
        if not _is_number(value):
            problems.append(f"{name}: must be a number")
        elif not _finite(value):
            problems.append(f"{name}: must be a finite number")
        elif name != "confidence" and value < 0:
            problems.append(f"{name}: must be greater than or equal to 0")
    for name in BOOL_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], bool):
            problems.append(f"{name}: must be true or false")
    if obj.get("input") is not None and not isinstance(obj["input"], str | dict):
        problems.append("input: must be a string or a JSON object")
    if obj.get("probabilities") is not None and not isinstance(obj["probabilities"], dict):
        problems.append("probabilities: must be a JSON object of label probabilities")
    if obj.get("metadata") is not None and not isinstance(obj["metadata"], dict):
        problems.append("metadata: must be a JSON object")
    action = obj.get("action")
    if isinstance(action, str) and action not in ACTIONS:
        problems.append("action: must be one of 'accept', 'abstain', 'fallback', 'human_review'")
    return problems


def check_probabilities(probabilities: dict[str, Any], spec: RecordSpec) -> list[float]:
    """Exact labels, numbers that are finite and non-negative, fsum within tolerance of 1.
    Returns the values in contract order; raises `RecordInvalid` with DecGuard's wording."""
    missing = [label for label in spec.labels if label not in probabilities]
    unknown = [key for key in probabilities if key not in spec.labels]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing labels {missing}")
        if unknown:
            parts.append(f"unknown labels {unknown}")
        raise RecordInvalid("probabilities do not match the contract labels: " + "; ".join(parts))
    values = []
    for label in spec.labels:
        value = probabilities[label]
        if not _is_number(value):
            raise RecordInvalid(
                f"probability of '{label}' must be a number, got {json.dumps(value)}"
            )
        if not _finite(value):
            shown = value if isinstance(value, float) else "an integer too large for a double"
            raise RecordInvalid(f"probability of '{label}' must be finite, got {shown}")
        if value < 0:
            raise RecordInvalid(f"probability of '{label}' must not be negative, got {value}")
        values.append(float(value))
    total = math.fsum(values)
    if abs(total - 1.0) > spec.tolerance:
        raise RecordInvalid(f"probabilities sum to {total:.6g}, outside 1 ± {spec.tolerance:g}")
    return values


def normalize_record(obj: Any, spec: RecordSpec, position: int) -> dict[str, Any]:
    """Validate one parsed record and return its row of the normalized table (without
    `position`'s partition offset applied by the caller). Raises `RecordInvalid`."""
    if not isinstance(obj, dict):
        raise RecordInvalid("invalid production record:\n  (root): must be a JSON object")
    problems = _field_problems(obj)
    if problems:
        raise RecordInvalid("invalid production record:\n" + "\n".join(f"  {p}" for p in problems))
    timestamp = parse_timestamp(obj["timestamp"]) if obj.get("timestamp") is not None else None
    if obj["decision"] != spec.decision:
        raise RecordInvalid(
            f"decision {quote(obj['decision'])} does not match contract decision '{spec.decision}'"
        )
    values = check_probabilities(obj["probabilities"], spec)
    selected = str(obj["selected"])
    if selected not in spec.labels:
        labels = list(spec.labels)
        raise RecordInvalid(
            f"selected {quote(selected)} is not one of the contract labels {labels}"
        )
    best = spec.labels[values.index(max(values))]
    if selected != best:
        raise RecordInvalid(f"selected '{selected}' is not the most probable label '{best}'")
    probability = values[spec.labels.index(selected)]
    confidence = obj.get("confidence")
    if confidence is not None and confidence != probability:
        raise RecordInvalid(
            f"confidence {confidence} does not equal the probability of '{selected}' "
            f"({probability})"
        )
    outcome = None if obj.get("outcome") is None else str(obj["outcome"])
    if outcome is not None and outcome not in spec.labels:
        labels = list(spec.labels)
        raise RecordInvalid(f"outcome {quote(outcome)} is not one of the contract labels {labels}")
    correct = obj.get("outcome_correct")
    if outcome is not None:
        derived = selected == outcome
        if correct is not None and correct != derived:
            raise RecordInvalid(f"outcome_correct {correct} disagrees with selected/outcome")
        correct = derived
    action, fallback = obj.get("action"), obj.get("fallback")
    if action == "fallback" and fallback is False:
        raise RecordInvalid("action 'fallback' conflicts with fallback=false")
    if fallback is True and action is not None and action != "fallback":
        raise RecordInvalid(f"fallback=true conflicts with action '{action}'")
    metadata = obj.get("metadata") or {}
    row: dict[str, Any] = {
        "position": position,
        "id": obj.get("id") or f"record-{position}",
        "timestamp": timestamp,
        "input_text": obj["input"] if isinstance(obj.get("input"), str) else None,
        "input_json": compact_json(obj["input"]) if isinstance(obj.get("input"), dict) else None,
        "probabilities": dict(zip(spec.labels, values, strict=True)),
        "selected": selected,
        "confidence": probability,
        "backend": obj.get("backend"),
        "model": obj.get("model"),
        "model_version": obj.get("model_version"),
        "outcome": outcome,
        "outcome_correct": correct,
        "latency_ms": _float_or_none(obj.get("latency_ms")),
        "cost": _float_or_none(obj.get("cost")),
        "action": action,
        "fallback": fallback,
        "metadata_json": compact_json(metadata),
    }
    for column, value in row.items():
        if isinstance(value, str):
            try:
                utf8_size(value, MAX_RECORD_FIELD_BYTES)
            except TextProblem as exc:
                field = column.removesuffix("_text").removesuffix("_json")
                raise RecordInvalid(f"{field} {exc}") from None
    for key in spec.segments:
        value = metadata.get(key)
        problem = segment_problem(value)
        row[segment_column(key)] = INVALID_SEGMENT + problem if problem else segment_token(value)
    return row


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def compact_json(value: Any) -> str:
    # Non-finite numbers are legal in metadata (only segment values must be finite).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads_strict(text: str | bytes | bytearray, max_values: int = MAX_JSON_VALUES) -> Any:
    """`json.loads` that rejects duplicate keys, nesting too deep for the parser and texts
    that may hold more than `max_values` values (raises ValueError naming the field)."""
    if found := values_over(text, max_values):
        raise ValueError(f"up to {found:,} values; at most {max_values:,} are read "
                         "(SECURITY.md)")
    try:
        return json.loads(text, object_pairs_hook=unique_keys, parse_int=_integer)
    except RecursionError:
        raise ValueError(nesting_problem(text)) from None


def _integer(text: str) -> int | float:
    # Past Python's digit limit an integer becomes a float (inf), as Arrow's reader on the
    # fast path reads it: the same record gets the same verdict on either path.
    limit = sys.get_int_max_str_digits()
    return float(text) if limit and len(text.lstrip("-")) > limit else int(text)


def inline_json(text: str) -> Any:
    """A validated record's JSON text (input or metadata) as the report holds it: the
    non-finite numbers metadata may carry (NaN, Infinity, 1e999, an integer past Python's
    digit limit) become null, since a JSON report cannot hold them."""
    return json.loads(text, parse_constant=_null, parse_float=lambda t: _finite_or_null(float(t)),
                      parse_int=lambda t: _finite_or_null(_integer(t)))


def _null(_: str) -> None:
    return None


def _finite_or_null(value: int | float) -> int | float | None:
    return value if isinstance(value, int) or math.isfinite(value) else None


def explain_line(line: str | bytes | bytearray, spec: RecordSpec) -> str | None:
    """The strict parser's verdict on one line: the problem, or None if it is valid."""
    try:
        obj = loads_strict(line)
    except ValueError as exc:
        return f"invalid JSON: {exc}"
    try:
        normalize_record(obj, spec, 1)
    except RecordInvalid as exc:
        return str(exc)
    return None


def invalid_json_at(number: int, exc: ValueError) -> str:
    """`line N, column C: invalid JSON: reason` for a refused line `number` of a JSONL file
    (the column of the file's line, not of a one-line document)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"line {number}, column {exc.colno}: invalid JSON: {exc.msg}"
    return f"line {number}: invalid JSON: {exc}"


def explain_jsonl_line(number: int, line: str | bytes, spec: RecordSpec) -> str | None:
    """`explain_line` of line `number` of a JSONL file, placed: `line N[, column C]: …`."""
    try:
        loads_strict(line)
    except ValueError as exc:
        return invalid_json_at(number, exc)
    problem = explain_line(line, spec)
    return None if problem is None else f"line {number}: {problem}"


