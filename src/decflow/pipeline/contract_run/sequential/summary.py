"""The report of a sequential run: its checks judged from the evidence at each batch
boundary, replayed from the stored results in the order they were sent (so a re-gate with
an edited contract judges the same cases), and the `sequential` section: per gate the
cases used, estimate, time-uniform interval, stop reason and e-values; per run the calls
made against the full suite's, the time and, with `backend.price_per_call`, money saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.gates.checks import Check
from decflow.pipeline.contract_run.derive import DIAGNOSTIC_PROPERTIES
from decflow.pipeline.contract_run.diagnostic_rows import stored_pair_table, stored_rows
from decflow.pipeline.contract_run.sequential.calls import Sent, tracked_gates
from decflow.pipeline.contract_run.sequential.diagnostics import DiagnosticInputs
from decflow.pipeline.contract_run.sequential.gates import (
    Design,
    GateState,
    advance,
    gate_alpha,
    sequential_checks,
)
from decflow.pipeline.contract_run.transformed import COMPARISON_COLUMNS
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract


def sequential_report(
    contract: Contract,
    spec: RunSpec,
    store: Store,
    manifests: dict[str, Manifest],
    table: pl.DataFrame,
    checks: list[dict[str, Any]],
    record: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the report's checks, its `sequential` section) for the run `record` describes;
    `table` holds the sent cases with their original's result, `checks` the full-run
    checks over those cases."""
    design = Design.from_dict(record["design"])
    order: list[str] = list(record["order"])
    position = pl.DataFrame({"case_id": order, "_order": range(len(order))})
    ordered = table.join(position, on="case_id").sort("_order").drop("_order")
    transformed, comparisons = stored_transformed(store, manifests)
    planned = [Check.from_dict(c) for c in checks]
    tracked = tracked_gates(contract, spec, planned,
                            Sent(order, ordered, transformed, comparisons,
                                 stored_diagnostics(store, manifests, record)), design)
    states: dict[str, GateState] = {}
    for bound in record["bounds"]:
        states = advance(states, tracked, bound, design)
    sent = len(order)
    judged, gates = sequential_checks(tracked, states, sent, design)
    made, full = int(record["calls_made"]), int(record["calls_full"])
    seconds = float(record["call_seconds"])
    price = contract.backend.price_per_call
    served = int(record.get("calls_from_cache", 0))
    saved_calls = full - made - served  # the call cache's savings are its own section
    section = {
        "alpha": design.alpha,
        "alpha_per_gate": gate_alpha(tracked, design),
        "seed": record["settings"]["seed"],
        # absent: the seed was drawn or set (`Sequential.settings`)
        **({"seed_from": record["settings"]["seed_from"]}
           if record["settings"].get("seed_from") else {}),
        "batch": record["settings"]["batch"],
        "max_cases": record["settings"].get("max_cases"),
        "zero_limit": design.zero_limit,
        "suite_cases": design.population,
        "cases_sent": sent,
        "batches": len(record["bounds"]),
        "stop_reason": record["stop_reason"],
        "calls_made": made,
        "calls_full": full,
        **({"calls_from_cache": served} if served else {}),
        "calls_saved": saved_calls,
        "call_seconds": seconds,
        "seconds_saved": round(seconds / made * saved_calls, 3) if made else None,
        "price_per_call": price,
        "money_saved": None if price is None else round(price * saved_calls, 6),
        "gates": gates,
    }
    return [c.to_dict() for c in judged], section


def stored_diagnostics(store: Store, manifests: dict[str, Manifest],
                       record: dict[str, Any]) -> DiagnosticInputs:
    """The stored diagnostic requests and results of the sent cases, the suite's persona
    pairs and the run's batches."""
    return DiagnosticInputs(stored_rows(store, manifests),
                            stored_pair_table(store, manifests["requests"]), record["bounds"])


def stored_transformed(store: Store, manifests: dict[str, Manifest]) -> tuple[pl.DataFrame,
                                                                          pl.DataFrame]:
    """(request_id, case_id, property, error_kind) of the sent metamorphic requests, and
    their stored comparisons (empty in `test` mode)."""
    requests = store.read(manifests["requests"], ["request_id", "case_id", "property"]).filter(
        (pl.col("property") != "") & ~pl.col("property").is_in(DIAGNOSTIC_PROPERTIES))
    answers = store.read(manifests["results"], ["request_id", "error_kind"])
    transformed = requests.join(answers, on="request_id", how="left")
    comparisons = (store.read(manifests["comparisons"]) if "comparisons" in manifests
                   else pl.DataFrame(schema=COMPARISON_COLUMNS))
    return transformed, comparisons
