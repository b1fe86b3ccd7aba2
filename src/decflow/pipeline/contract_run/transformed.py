"""Transformed property requests read back with their results and their originals, and
judged with the contract at hand: shared by the `comparisons` and `minimized` stages and
the report's `properties` section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from decflow.metrics.compare import Comparison, Judgement, Limits, judge
from decflow.pipeline.contract_run.derive import DIAGNOSTIC_PROPERTIES
from decflow.properties.generate import relation_of
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.properties import PropertyConfig

COMPARISON_COLUMNS = {
    "request_id": pl.String,
    "case_id": pl.String,
    "property": pl.String,
    "tv": pl.Float64,
    "js": pl.Float64,
    "max_abs_delta": pl.Float64,
    "confidence_delta": pl.Float64,
    "selected_before": pl.Int64,
    "selected_after": pl.Int64,
    "flipped": pl.Boolean,
    "rank_changed": pl.Boolean,
    "level_delta": pl.Float64,
}


def relation_direction(config: PropertyConfig | None) -> str:
    return getattr(config, "direction", "increasing") or "increasing"


def joined_transformed(
    store: Store,
    manifests: Mapping[str, Manifest],
    *,
    requests: Sequence[str] | None = None,
    results: Sequence[str] | None = None,
    original_inputs: bool = True,
    probabilities: bool = True,
    where: pl.Expr | None = None,
) -> pl.DataFrame:
    """Transformed property requests with their result, their original's input and
    probabilities.

    `requests` / `results` name the columns wanted besides request_id, case_id, property and
    probabilities (default: all), `original_inputs=False` leaves out the original's text and
    JSON, `probabilities=False` both probability columns, and `where` keeps only the
    requests it matches; requests are filtered part by part, so only the wanted rows and
    columns are ever held.
    """
    # Reruns and persona arms are judged by the diagnostics section, not as properties.
    metamorphic = (pl.col("property") != "") & ~pl.col("property").is_in(DIAGNOSTIC_PROPERTIES)
    wanted = metamorphic if where is None else metamorphic & where
    inputs = ["input_text", "input_json"] if original_inputs else []
    request_columns = None if requests is None else list(
        dict.fromkeys(["request_id", "case_id", "property", *requests])
    )
    read_columns = None if request_columns is None else list(
        dict.fromkeys([*request_columns, *inputs])
    )
    transformed, originals = [], []
    for part in manifests["requests"].parts:
        table = store.read_part(part, read_columns)
        found = table.filter(wanted)
        transformed.append(found if request_columns is None else found.select(request_columns))
        originals.append(
            table.filter(pl.col("property") == "").select("request_id", "case_id", *inputs)
        )
    rows = pl.concat(transformed, how="vertical")
    result_columns = None if results is None else list(
        dict.fromkeys(["request_id", *(["probabilities"] if probabilities else []), *results])
    )
    # Not filtered by id: a set of ids hashed again for each of hundreds of result chunks
    # costs more than joining the narrow columns once.
    answers = store.read(manifests["results"], result_columns)
    with_results = rows.join(answers, on="request_id", how="left", maintain_order="left")
    if not probabilities and not inputs:
        return with_results
    original = pl.concat(originals, how="vertical")
    if probabilities:
        original = original.join(
            answers.select("request_id", original_probabilities="probabilities"),
            on="request_id", how="left", maintain_order="left",
        )
    original = original.select(
        "case_id", *(["original_probabilities"] if probabilities else []),
        *[pl.col(name).alias(name.replace("input", "original")) for name in inputs],
    )
    return with_results.join(original, on="case_id", how="left", maintain_order="left")


def comparison_of(frame: pl.DataFrame) -> Comparison:
    level = frame["level_delta"]
    return Comparison(
        tv=frame["tv"].to_numpy(),
        js=frame["js"].to_numpy(),
        max_abs_delta=frame["max_abs_delta"].to_numpy(),
        confidence_delta=frame["confidence_delta"].to_numpy(),
        selected_before=frame["selected_before"].to_numpy(),
        selected_after=frame["selected_after"].to_numpy(),
        flipped=frame["flipped"].to_numpy(),
        rank_changed=frame["rank_changed"].to_numpy(),
        level_delta=None if level.null_count() == frame.height else level.to_numpy(),
    )


def judged(
    contract: Contract, prop: str, config: PropertyConfig, rows: pl.DataFrame
) -> tuple[Comparison, Judgement]:
    relation = relation_of(prop)
    found = comparison_of(rows)
    verdict = judge(found, Limits.of(config, relation), relation=relation,
                    labels=contract.decision.labels, direction=relation_direction(config))
    return found, verdict
