"""Vectorized record checks: the same rules as `records.rules`, as polars expressions over a
whole batch (Arrow-typed JSONL or Parquet). They only find the first bad row; the strict
parser then says what is wrong with it. `NeedStrict` means the batch cannot be decided
here (for example metadata whose numbers could be ints or floats) and must go through the
strict parser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import polars as pl
from polars.expr.whenthen import ChainedThen, Then

from decflow.data.records.rules import (
    ACTIONS,
    INVALID_SEGMENT,
    MISSING_TOKEN,
    NOT_FINITE,
    NOT_SCALAR,
    RECORD_FIELDS,
    RecordInvalid,
    RecordSpec,
    parse_timestamp,
    segment_column,
    segment_token,
)


class NeedStrict(Exception):
    """The fast path cannot decide this partition (or cannot locate a problem)."""


def _null_or(dtype: pl.DataType, *allowed: type[pl.DataType]) -> bool:
    return dtype == pl.Null or isinstance(dtype, allowed)


def vectorized_table(raw: pl.DataFrame, spec: RecordSpec) -> tuple[int | None, pl.DataFrame | None]:
    """(first bad row or None, normalized table when all rows are good). `metadata_json` is
    `{}` and `input_json` null here; the callers fill them from the source text."""
    labels = spec.labels
    checks: list[pl.Expr] = []
    for name in raw.columns:
        if name not in RECORD_FIELDS:
            if raw[name].dtype == pl.Null:
                raise NeedStrict
            checks.append(pl.col(name).is_not_null())
    missing = [pl.lit(None).alias(name) for name in RECORD_FIELDS if name not in raw.columns]
    if missing:
        raw = raw.with_columns(missing)
    probs = raw["probabilities"].dtype
    fields = [f.name for f in probs.fields] if isinstance(probs, pl.Struct) else []
    if probs != pl.Null and not isinstance(probs, pl.Struct):
        checks.append(pl.col("probabilities").is_not_null())
    extra = [name for name in fields if name not in labels]
    p = [
        pl.col("probabilities").struct.field(lb).cast(pl.Float64)
        if lb in fields
        else pl.lit(None, dtype=pl.Float64)
        for lb in labels
    ]
    for name in extra:
        checks.append(pl.col("probabilities").struct.field(name).is_not_null())
    if extra and raw.select(pl.any_horizontal(checks[-len(extra):]).any()).item() is False:
        raise NeedStrict  # an unknown label whose value is null everywhere
    checks.append(pl.col("probabilities").is_null())
    for col in p:
        checks.append(col.is_null() | col.is_nan() | col.is_infinite() | (col < 0))
    total = pl.sum_horizontal(p)
    # Near the tolerance edge the naive sum may differ from fsum: recheck those exactly.
    near = ((total - 1.0).abs() - spec.tolerance).abs() <= 1e-9
    raw = raw.with_columns(_near=near.fill_null(False))
    off = ((total - 1.0).abs() > spec.tolerance) & ~pl.col("_near")
    checks.append(off)
    if raw["_near"].any():
        checks.append(pl.col("_near") & pl.lit(pl.Series(_exact_sum_off(raw, spec))))

    checks.append(pl.col("decision").is_null() | (pl.col("decision") != spec.decision))
    selected, bad_sel = _label_column(raw, "selected")
    outcome, bad_out = _label_column(raw, "outcome")
    checks += [bad_sel, bad_out, selected.is_null()]
    checks.append(~_one_of(selected, labels))
    checks.append(outcome.is_not_null() & ~_one_of(outcome, labels))
    best = pl.max_horizontal(p)
    argmax: Then | ChainedThen = pl.when(p[0] == best).then(pl.lit(labels[0]))
    for lb, col in zip(labels[1:], p[1:], strict=True):
        argmax = argmax.when(col == best).then(pl.lit(lb))
    checks.append(selected != argmax)
    chosen: Then | ChainedThen = pl.when(selected == labels[0]).then(p[0])
    for lb, col in zip(labels[1:], p[1:], strict=True):
        chosen = chosen.when(selected == lb).then(col)
    checks.append(pl.col("confidence").is_not_null() & (pl.col("confidence") != chosen))
    derived = pl.when(outcome.is_not_null()).then(selected == outcome)
    checks.append(
        derived.is_not_null()
        & pl.col("outcome_correct").is_not_null()
        & (derived != pl.col("outcome_correct"))
    )
    for name in ("latency_ms", "cost"):
        col = pl.col(name)
        checks.append(col.is_not_null() & (col.is_nan() | col.is_infinite() | (col < 0)))
    checks.append(pl.col("confidence").is_nan() | pl.col("confidence").is_infinite())
    checks.append(pl.col("action").is_not_null() & ~_one_of(pl.col("action"), ACTIONS))
    checks.append((pl.col("action") == "fallback") & (pl.col("fallback") == False))  # noqa: E712
    checks.append(
        (pl.col("fallback") == True)  # noqa: E712
        & pl.col("action").is_not_null()
        & (pl.col("action") != "fallback")
    )
    checks.append(pl.col("id") == "")
    input_type = raw["input"].dtype
    if not _null_or(input_type, pl.String, pl.Struct):
        checks.append(pl.col("input").is_not_null())
    meta_type = raw["metadata"].dtype
    if not _null_or(meta_type, pl.Struct):
        checks.append(pl.col("metadata").is_not_null())
    segment_exprs = _segment_tokens(raw, spec)
    timestamps, bad_time = _timestamps(raw)
    checks.append(bad_time)

    frame = raw.with_columns(
        _bad=pl.any_horizontal([c.fill_null(False) for c in checks]),
        _selected=selected,
        _outcome=outcome,
        _chosen=chosen,
        _derived=derived,
        _timestamp=timestamps,
    )
    bad_rows = frame["_bad"].arg_true()
    if bad_rows.len():
        return int(bad_rows[0]), None
    table = frame.select(
        pl.lit(None, dtype=pl.Int64).alias("position"),
        pl.col("id"),
        pl.col("_timestamp").alias("timestamp"),
        (pl.col("input") if input_type == pl.String else pl.lit(None, dtype=pl.String)).alias(
            "input_text"
        ),
        pl.lit(None, dtype=pl.String).alias("input_json"),
        pl.struct([col.alias(lb) for lb, col in zip(labels, p, strict=True)]).alias(
            "probabilities"
        ),
        pl.col("_selected").alias("selected"),
        pl.col("_chosen").alias("confidence"),
        pl.col("backend"),
        pl.col("model"),
        pl.col("model_version"),
        pl.col("_outcome").alias("outcome"),
        pl.coalesce(pl.col("_derived"), pl.col("outcome_correct")).alias("outcome_correct"),
        pl.col("latency_ms"),
        pl.col("cost"),
        pl.col("action"),
        pl.col("fallback"),
        pl.lit("{}").alias("metadata_json"),
        *segment_exprs,
    )
    return None, table.cast(spec.schema)  # type: ignore[arg-type]


# Up to this many values, membership is a chain of equalities (2-3x faster than a hashed
# `is_in` on short strings); null stays null either way.
_COMPARED_VALUES = 8


def _one_of(column: pl.Expr, values: Sequence[str]) -> pl.Expr:
    if len(values) > _COMPARED_VALUES:
        return column.is_in(list(values))
    return pl.any_horizontal([column == value for value in values])


def _exact_sum_off(raw: pl.DataFrame, spec: RecordSpec) -> np.ndarray:
    """Rows near the tolerance edge whose exact (fsum) total is outside it."""
    off = np.zeros(raw.height, dtype=bool)
    near = raw.with_row_index("_row").filter(pl.col("_near"))
    for row, value in near.select("_row", "probabilities").iter_rows():
        if value is None or any(value.get(lb) is None for lb in spec.labels):
            continue
        total = math.fsum(value[lb] for lb in spec.labels)
        off[row] = abs(total - 1.0) > spec.tolerance
    return off


def _label_column(raw: pl.DataFrame, name: str) -> tuple[pl.Expr, pl.Expr]:
    """(the field as a label string, rows whose JSON type is not allowed). Integers become
    strings; any other type is rejected."""
    dtype = raw[name].dtype
    if dtype == pl.String or dtype == pl.Null:
        return pl.col(name).cast(pl.String), pl.lit(False)
    if dtype == pl.Int64:
        return pl.col(name).cast(pl.String), pl.lit(False)
    return pl.lit(None, dtype=pl.String), pl.col(name).is_not_null()


_FIRST_INSTANT = datetime(1, 1, 1, tzinfo=UTC)
_LAST_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)

# years 0001 to 9999: polars parses year 0000, ISO 8601 as `datetime.fromisoformat` reads it
# has none
_YEAR = r"(?:000[1-9]|00[1-9]\d|0[1-9]\d{2}|[1-9]\d{3})"
_CLOCK = rf"{_YEAR}-\d{{2}}-\d{{2}}T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
_UTC_SECONDS = f"^{_CLOCK}Z$"
_WITH_OFFSET = rf"^{_CLOCK}(?:\.\d{{3}}|\.\d{{6}})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$"


def _timestamps(raw: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """Parsed UTC timestamps and rows whose timestamp is invalid or has no timezone.

    `datetime.fromisoformat` is the reference for what ISO 8601 means here. polars parses
    the common shapes much faster, but leniently (it takes `2026-1-5` or second 60), so it
    only sees strings a strict pattern has vetted; everything else is parsed once per
    distinct string by Python."""
    dtype = raw["timestamp"].dtype
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
        converted = pl.col("timestamp").dt.convert_time_zone("UTC").dt.cast_time_unit("us")
        # a typed instant is written in UTC: as ISO 8601 text, its year must be 1 to 9999
        # (compared as instants: 10x cheaper than taking every record's year)
        return converted, ~converted.is_between(_FIRST_INSTANT, _LAST_INSTANT)
    if dtype == pl.Null:
        return pl.lit(None, dtype=pl.Datetime("us", "UTC")), pl.lit(False)
    target = pl.Datetime("us", "UTC")
    text = raw["timestamp"]
    utc = text.str.contains(_UTC_SECONDS)
    parsed = text.str.strptime(target, format="%Y-%m-%dT%H:%M:%SZ", strict=False)
    parsed = pl.select(pl.when(utc).then(parsed)).to_series()
    rest = text.is_not_null() & parsed.is_null()
    if rest.any():
        offset = rest & text.str.contains(_WITH_OFFSET)
        general = text.str.replace(r"Z$", "+00:00").str.to_datetime(
            format="%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us", time_zone="UTC"
        )
        parsed = pl.select(pl.when(offset).then(general).otherwise(parsed)).to_series()
        rest = text.is_not_null() & parsed.is_null()
    if rest.any():
        good: dict[str, datetime] = {}
        for value in text.filter(rest).unique().to_list():
            try:
                good[value] = parse_timestamp(value)
            except RecordInvalid:
                continue
        slow = text.replace_strict(
            pl.Series(list(good), dtype=pl.String),
            pl.Series(list(good.values()), dtype=target),
            default=None,
            return_dtype=target,
        )
        parsed = pl.select(pl.coalesce(parsed, slow)).to_series()
    return pl.lit(parsed), pl.lit(text.is_not_null() & parsed.is_null())


def _segment_tokens(raw: pl.DataFrame, spec: RecordSpec) -> list[pl.Expr]:
    """Segment token columns; values that cannot be segments get `invalid:<reason>`."""
    exprs: list[pl.Expr] = []
    meta_type = raw["metadata"].dtype
    names = {f.name: f.dtype for f in meta_type.fields} if isinstance(meta_type, pl.Struct) else {}
    for key in spec.segments:
        target = segment_column(key)
        if key not in names or names[key] == pl.Null:
            exprs.append(pl.lit(MISSING_TOKEN).alias(target))
            continue
        dtype = names[key]
        value = pl.col("metadata").struct.field(key)
        if dtype == pl.String:
            token = _tokens_by_value(raw, value, str)
        elif dtype == pl.Boolean:
            token = pl.when(value).then(pl.lit("bool:True")).otherwise(pl.lit("bool:False"))
        elif dtype == pl.Int64:
            token = pl.lit("int:") + value.cast(pl.String)
        elif dtype == pl.Float64:
            integral = raw.select((value.round(0) == value).any()).item()
            if integral:
                raise NeedStrict  # Arrow widened ints to floats: the type is lost
            token = (
                pl.when(value.is_nan() | value.is_infinite())
                .then(pl.lit(INVALID_SEGMENT + NOT_FINITE))
                .otherwise(_tokens_by_value(raw, value, float))
            )
        else:
            token = pl.when(value.is_not_null()).then(pl.lit(INVALID_SEGMENT + NOT_SCALAR))
        exprs.append(pl.coalesce(token, pl.lit(MISSING_TOKEN)).alias(target))
    return exprs


def _tokens_by_value(raw: pl.DataFrame, value: pl.Expr, kind: type) -> pl.Expr:
    # Few distinct values per segment key: compute the token in Python once per value.
    distinct = [v for v in raw.select(value.unique()).to_series().to_list() if v is not None]
    if isinstance(raw.select(value).to_series().dtype, pl.Float64):
        distinct = [v for v in distinct if math.isfinite(v)]
    tokens = [segment_token(kind(v)) for v in distinct]
    return value.replace_strict(
        pl.Series(distinct), pl.Series(tokens, dtype=pl.String), default=None,
        return_dtype=pl.String,
    )


