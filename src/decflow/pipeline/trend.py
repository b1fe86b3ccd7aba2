"""The trend of a decision: its last stored runs with every gated metric and its interval.

`decflow runs trend DECISION` and the trend section of a diff's HTML read the same table.
Per finished contract run (noise runs, probes and checks are left out), oldest first: its
status, whether it is the accepted baseline of its backend, and for each gate it was judged
by — its run checks, and its regression checks when a nightly diff is stored beside it —
the value, the one-sided 95 % bounds (the check's evidence; for a proportion without
evidence, its exact Clopper-Pearson bounds over the report's cases) and the status.
"""

from __future__ import annotations

from typing import Any

from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.store.runs import (
    FINISHED,
    accepted_run,
    creation_order,
    list_runs,
    report_path,
    run_path,
)
from decflow.store.store import Store

DEFAULT_LAST = 10
ALPHA = 0.05
# Proportion metrics of a run report and where its n is.
PROPORTIONS = {
    "accuracy": ("classification", "n"),
    "error_rate": ("counts", "total"),
    "coverage": ("selective", "n"),
    "abstention_rate": ("selective", "n"),
}


def _interval(check: dict[str, Any], metrics: dict[str, Any]) -> tuple[Any, Any]:
    evidence = check.get("evidence") or {}
    if evidence.get("low") is not None and evidence.get("high") is not None:
        return float(evidence["low"]), float(evidence["high"])
    where = PROPORTIONS.get(check["metric"])
    value = check.get("value")
    if where is None or value is None:
        return None, None
    n = (metrics.get(where[0]) or {}).get(where[1])
    if not n:
        return None, None
    count = round(value * n)
    return clopper_pearson_low(count, n, ALPHA), clopper_pearson_high(count, n, ALPHA)


def _cells(checks: list[dict[str, Any]], metrics: dict[str, Any], prefix: str
           ) -> dict[str, dict[str, Any]]:
    cells = {}
    for check in checks:
        low, high = _interval(check, metrics)
        name = prefix + check["gate"] + (" (warning)" if check["level"] == "warning" else "")
        cells[name] = {"value": check.get("value"), "low": low, "high": high,
                       "status": check["status"], "threshold": check.get("threshold")}
    return cells


def decision_trend(store: Store, decision: str, *, backend: str | None = None,
                   last: int = DEFAULT_LAST) -> dict[str, Any]:
    """The last `last` finished runs of `decision` (on `backend`, or any), oldest first."""
    records = [r for r in list_runs(store).records
               if r.get("kind", "run") == "run" and r.get("decision") == decision
               and (backend is None or r.get("backend") == backend)
               and r.get("status") in FINISHED and store.exists(report_path(r["run_id"]))]
    accepted = {name: accepted_run(store, decision, name)
                for name in {r["backend"] for r in records}}
    records.sort(key=creation_order)
    rows, gates = [], {}
    for record in records[-last:] if last > 0 else records:
        run_id = record["run_id"]
        report = store.read_json(report_path(run_id))
        cells = _cells(report.get("checks") or [], report.get("metrics") or {}, "")
        diff_file = run_path(run_id, "diff.json")
        baseline = None
        if store.exists(diff_file):
            diff = store.read_json(diff_file)
            cells.update(_cells(diff.get("checks") or [], {}, "diff."))
            baseline = (diff.get("baseline") or {}).get("path")
        gates.update(dict.fromkeys(cells))
        rows.append({
            "run_id": run_id, "created_at": report.get("created_at"),
            "backend": record["backend"], "status": record["status"],
            "accepted": accepted.get(record["backend"]) == run_id,
            "diffed_against": baseline, "gates": cells,
        })
    return {"decision": decision, "backend": backend, "gates": list(gates), "runs": rows}
