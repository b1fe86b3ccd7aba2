"""The rows a run's diagnostics read: its original, rerun, paraphrase and persona-arm
requests joined with their results (`DiagnosticRows`), and the persona pairs its requests
stage stored. Shared by the diagnostics section, its counterfactual part and a sequential
run's trackers."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from decflow.pipeline.contract_run.derive import COUNTERFACTUAL, PERSONA_PAIRS, RERUN
from decflow.pipeline.contract_run.results import phase_result_parts
from decflow.store.store import Manifest, Store


@dataclass(frozen=True)
class DiagnosticRows:
    """The requests the diagnostics read, joined with their results."""

    originals: pl.DataFrame  # property "", one per case
    reruns: pl.DataFrame  # property "stability"
    paraphrases: pl.DataFrame  # property "paraphrase" (identity re-asks are rerun evidence)
    arms: pl.DataFrame  # property "counterfactual"


WANTED = ("", RERUN, "paraphrase", COUNTERFACTUAL)
REQUEST_COLUMNS = ["request_id", "case_id", "property", "sample", "input_text", "input_json"]
RESULT_COLUMNS = ["request_id", "selected", "probabilities", "error_kind"]


def diagnostic_rows(requests: pl.DataFrame, results: pl.DataFrame) -> DiagnosticRows:
    """The requests the diagnostics read (`REQUEST_COLUMNS`, any others ignored) joined
    with their results (`RESULT_COLUMNS`)."""
    joined = requests.filter(pl.col("property").is_in(WANTED)).select(REQUEST_COLUMNS).join(
        results.select(RESULT_COLUMNS), on="request_id", how="left")
    by = {name: joined.filter(pl.col("property") == name) for name in WANTED}
    return DiagnosticRows(by[""], by[RERUN], by["paraphrase"], by[COUNTERFACTUAL])


def stored_rows(store: Store, manifests: dict[str, Manifest]) -> DiagnosticRows:
    """The run's stored diagnostic requests joined with their results."""
    requests = store.read(manifests["requests"], REQUEST_COLUMNS,
                          where=pl.col("property").is_in(WANTED))
    columns = RESULT_COLUMNS
    # A derived request's id starts with its property's name (`derive.py`), so the
    # transformed phase's results are narrowed by prefix before the join, part by part.
    named = pl.any_horizontal(
        [pl.col("request_id").str.starts_with(f"{name}/") for name in WANTED if name]
    )
    parts = [
        store.read(phase_result_parts(manifests["results"], "originals"), columns),
        store.read(phase_result_parts(manifests["results"], "transformed"), columns, named),
    ]
    results = pl.concat([frame for frame in parts if frame.width], how="vertical")
    return diagnostic_rows(requests, results)


def stored_pair_table(store: Store, requests: Manifest) -> pl.DataFrame | None:
    """The table of persona pairs (`pair_storage.pair_table`) the run's requests stage drew
    for the whole suite and stored (None: the run stored none)."""
    stored = requests.extra.get(PERSONA_PAIRS)
    return None if stored is None else store.read(Manifest.from_dict(stored["manifest"]))
