"""Baselines of a production check: records (through the check's own stages), an earlier
check report, or a stored check run; drift is measured against their metrics."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.data.records.reader import RecordSpec, normalize_objects
from decflow.data.records.units import plan_source
from decflow.errors import DatasetError, ReportError
from decflow.metrics.production import Metrics, partition_stats, production_metrics
from decflow.pipeline.driver import RunBook
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.production.stages import (
    AGGREGATES,
    CheckContext,
    CheckSpec,
    stored_aggregates,
)
from decflow.pipeline.production.statistics import binning
from decflow.pipeline.production.workers import read_units
from decflow.pipeline.spec import load_contract_cached
from decflow.store.remote import is_url
from decflow.store.store import Manifest, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract


def _unrecorded(_spec: CheckSpec, _manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    return {}


# The statistics of baseline records: the check's own `aggregates` (so a baseline checked
# before is a cache hit), never recorded as a run.
BASELINE: Pipeline[CheckSpec] = Pipeline(
    "baseline", f"{__name__}:BASELINE", CheckSpec.from_dict, (AGGREGATES,), None, _unrecorded,
    local_units=read_units)


@dataclass(frozen=True)
class Baseline:
    block: dict[str, Any]  # the report's `baseline` object
    metrics: Metrics


def _is_report(path: Path) -> dict[str, Any] | None:
    if path.suffix != ".json" or not path.is_file():
        return None
    try:
        document = json.loads(path.read_bytes())
    except (ValueError, OSError):
        return None
    if isinstance(document, dict) and (
        "check_version" in document or document.get("kind") == "check"
    ):
        return document
    return None


def load_baseline(context: CheckContext, source: str) -> Baseline:
    """A baseline: a records source (file, folder, glob), whose statistics come from the
    check's own stages (`AGGREGATES`, through the same store: a baseline checked before is
    a cache hit); an earlier check report (DecGuard's or decflow's), whose records are
    re-normalized under this contract; or, when `source` names no file or folder, a check
    run in the store (`accepted`: the check run accepted for the decision)."""
    contract, store = context.loaded.contract, context.store
    if not names_records(source):
        from decflow.pipeline.stored.check_runs import stored_check

        run_id, stored, report_hash = stored_check(store, source, contract.decision.name)
        return _baseline_from_report(contract, f"run {run_id}", stored, report_hash,
                                     run_id=run_id)
    report = _is_report(Path(source))
    if report is not None:
        return _baseline_from_report(contract, source, report, file_sha256(Path(source)))
    spec = replace(context.spec, records=source, run_id="", plan=plan_source(source),
                   baseline=None, parent=None)
    with RunBook(BASELINE, spec, store, loaded=context.loaded, logger=context.logger,
                 progress=context.progress) as book:
        book.run_all()
    aggregates = stored_aggregates(store, RecordSpec.from_contract(contract),
                                   book.manifests[AGGREGATES.name], shown_path=source,
                                   merged=book.context.outputs.get("merged"))
    n_bins, threshold = binning(contract)
    metrics = production_metrics(aggregates.overall, n_bins, threshold)
    block = {
        "source": "dataset",
        "path": source,
        "hash": aggregates.hash,
        "n_records": aggregates.overall.total,
        "metrics": metrics,
    }
    return Baseline(block, metrics)


def baseline_found(store: Store, spec: CheckSpec) -> None:
    """A baseline that names no records must be a check run in the store: said before the
    check is recorded (a wrong `--baseline` is the command line's problem, not a run to
    finish)."""
    if spec.baseline is not None and not names_records(spec.baseline):
        from decflow.pipeline.stored.check_runs import stored_check

        decision = load_contract_cached(spec.contract_path).contract.decision.name
        stored_check(store, spec.baseline, decision)


def names_records(source: str) -> bool:
    """Whether `source` is records (or a report file): an existing file or folder, a glob,
    or an object-store URL; anything else is taken for a run id."""
    return os.path.exists(source) or is_url(source) or any(c in source for c in "*?[")


def file_sha256(path: Path) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _baseline_from_report(contract: Contract, source: str, report: dict[str, Any],
                          file_hash: str, run_id: str | None = None) -> Baseline:
    name = (report.get("contract") or {}).get("name")
    if name is not None and name != contract.decision.name:
        raise DatasetError(
            f"{source}: the baseline report is for decision '{name}', "
            f"not '{contract.decision.name}'"
        )
    records = report.get("records")
    n_bins, threshold = binning(contract)
    if isinstance(records, list):
        table = normalize_objects(records, RecordSpec.from_contract(contract), source)
        stats = partition_stats(table, tuple(contract.decision.labels), n_bins, threshold)
        if not stats:
            raise DatasetError(f"{source}: the baseline report holds no records")
        _verify_stored_metrics(source, report, table, tuple(contract.decision.labels))
        metrics = production_metrics(stats[""], n_bins, threshold)
        n_records = table.height
    else:
        metrics = report.get("metrics") or {}
        histogram = (metrics.get("confidence") or {}).get("histogram") or []
        if len(histogram) != n_bins:
            raise DatasetError(
                f"{source}: the baseline report does not inline its records and its "
                f"confidence histogram has {len(histogram)} bins, not {n_bins}; "
                "rerun it with this contract"
            )
        n_records = metrics["counts"]["total"]
    block = {
        "source": "report" if run_id is None else "run",
        "path": source,
        "hash": file_hash,
        "n_records": n_records,
        "metrics": metrics,
    }
    if run_id is not None:
        block["run_id"] = run_id
    return Baseline(block, metrics)


def _verify_stored_metrics(
    source: str, report: dict[str, Any], table: pl.DataFrame, labels: tuple[str, ...]
) -> None:
    """A report's stored metrics must be what its own records and settings give: a report
    edited after it was written does not become a baseline."""
    evaluation = report.get("evaluation") or {}
    bins = evaluation.get("calibration_bins")
    threshold = evaluation.get("confidence_threshold")
    stored = report.get("metrics")
    if not isinstance(bins, int) or stored is None:
        raise ReportError(f"{source}: not a check report (no evaluation settings or metrics)")
    stats = partition_stats(table, labels, bins, threshold)
    if production_metrics(stats[""], bins, threshold) != stored:
        raise ReportError(
            f"{source}: the baseline report does not verify: its metrics do not match its "
            "records (was it edited?)"
        )
