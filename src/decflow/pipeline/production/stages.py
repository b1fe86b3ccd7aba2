"""The production check as three stages: `records` → `aggregates` → `summary`.

- `records`: read and validate every partition (`data.records`), one batch at a time.
- `aggregates`: reduce each batch to mergeable statistics (`metrics.production`) for the
  whole dataset and for every segment value, and merge them.
- `summary`: final metrics, drift against the baseline, gates, segments → the report.

`check_records` runs them in-process without keeping more than one batch of records in
memory; `stage_records`, `stage_aggregates` and `stored_aggregates` + `summarize` are the
same steps exchanging Parquet artifacts through the store (one records part and one
aggregates part per batch, so partitions can be processed by separate tasks).

The report carries the records inline up to `INLINE_RECORDS` (like DecGuard's); larger
inputs are named, not copied (`records_inline: false`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.data.records import (
    RecordReader,
    RecordSpec,
    file_sha256,
    list_partitions,
    normalize_objects,
    segment_column,
    segment_display,
    segment_value,
    source_hash,
)
from decflow.errors import DatasetError, ReportError
from decflow.gates.checks import Check, status_of
from decflow.gates.production import (
    PRODUCTION_GATES,
    SEGMENT_GATES,
    aggregate_checks,
    gate_settings,
    segment_checks,
)
from decflow.metrics.production import (
    GroupStats,
    Metrics,
    drift,
    group_ids,
    grouped_stats,
    merge_groups,
    partition_stats,
    production_metrics,
    record_columns,
    stats_from_row,
    stats_row,
)
from decflow.report.versions import REPORT_VERSION
from decflow.store.runs import now_iso
from decflow.version import __version__

if TYPE_CHECKING:
    from decflow.store.store import Manifest, Store

INLINE_RECORDS = 10_000


@dataclass
class Aggregates:
    """Merged statistics of a record source (the `aggregates` stage's output)."""

    path: str
    hash: str
    files: list[str]
    overall: GroupStats
    segments: dict[str, dict[str, GroupStats]] = field(default_factory=dict)
    records: list[dict[str, Any]] | None = None  # kept while small enough to inline
    records_artifact: dict[str, Any] | None = None  # the stored table otherwise


def _settings(contract: Any) -> tuple[int, float | None]:
    evaluation = contract.evaluation
    return int(evaluation.calibration_bins), evaluation.confidence_threshold


SEGMENT_SEPARATOR = "\x1f"


def batch_stats(table: pl.DataFrame, spec: RecordSpec, contract: Any) -> dict[str, GroupStats]:
    """Statistics of one batch: the whole batch under `""`, each segment value under
    `<key>\x1f<token>`."""
    if table.height == 0:
        return {}
    n_bins, threshold = _settings(contract)
    columns = record_columns(table, spec.labels, n_bins, threshold)
    keys, groups = group_ids(table, None)
    out = grouped_stats(columns, keys, groups, n_bins)
    for key in spec.segments:
        keys, groups = group_ids(table, segment_column(key))
        for token, stats in grouped_stats(columns, keys, groups, n_bins).items():
            out[f"{key}{SEGMENT_SEPARATOR}{token}"] = stats
    return out


def _aggregates(
    merged: dict[str, GroupStats], spec: RecordSpec, path: str, digest: str, files: list[str]
) -> Aggregates:
    if "" not in merged:
        raise DatasetError(f"{path}: production dataset contains no records")
    segments: dict[str, dict[str, GroupStats]] = {key: {} for key in spec.segments}
    for group, stats in merged.items():
        if group:
            key, _, token = group.partition(SEGMENT_SEPARATOR)
            segments[key][token] = stats
    return Aggregates(path, digest, files, merged[""], segments)


Progress = Callable[[int, int | None], None]


def aggregate_records(
    contract: Any,
    source: str | Path | list[str | Path],
    *,
    shown_path: str | None = None,
    progress: Progress | None = None,
) -> Aggregates:
    """Stages `records` and `aggregates` in one streaming pass over the partitions;
    `progress(records so far, None)` after every batch."""
    spec = RecordSpec.from_contract(contract)
    reader = RecordReader(source, spec)
    merged: dict[str, GroupStats] = {}
    kept: list[pl.DataFrame] | None = []
    for batch in reader.batches():
        merged = merge_groups(merged, batch_stats(batch.table, spec, contract))
        if progress:
            progress(reader.n_records, None)
        if kept is not None:
            kept = [*kept, batch.table] if reader.n_records <= INLINE_RECORDS else None
    path = shown_path or str(source)
    files = [str(f) for f in reader.files]
    aggregates = _aggregates(merged, spec, path, reader.dataset_hash, files)
    if kept:
        aggregates.records = _records_json(pl.concat(kept), spec)
    return aggregates


# -- the same stages through the store ------------------------------------------------------

STAGE_VERSION = "1"


def stage_records(
    store: Store,
    contract: Any,
    contract_hash: str,
    source: str,
    *,
    shown_path: str | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """Validate and normalize every record into `stages/records/<key>/part-*.parquet`, one
    part per batch. Keyed by contract and the source's bytes."""
    spec = RecordSpec.from_contract(contract)
    files = list_partitions(source)
    digest = source_hash(files, [file_sha256(f) for f in files])
    from decflow.store.store import stage_key

    key = stage_key("records", STAGE_VERSION, contract_hash, [digest], {})
    cached = store.manifest("records", key)
    if cached is not None:
        return cached
    reader = RecordReader(files, spec)
    prefix = store.stage_prefix("records", key)
    parts = []
    for i, batch in enumerate(reader.batches()):
        parts.append(store.write_part(f"{prefix}/part-{i:05d}.parquet", batch.table))
        if progress:
            progress(reader.n_records, None)
    extra = {
        "path": shown_path or source,
        "hash": reader.dataset_hash,
        "files": [str(f) for f in files],
        "n_records": reader.n_records,
    }
    schema = {name: str(dtype) for name, dtype in spec.schema.items()}
    return store.publish("records", key, [], parts=parts, schema=schema, extra=extra)


def stage_aggregates(
    store: Store, contract: Any, contract_hash: str, records: Manifest
) -> Manifest:
    """Sufficient statistics per records part (one table row per group and part); the
    parts are independent, so they can be computed anywhere and merged later."""
    from decflow.store.store import stage_key

    key = stage_key("aggregates", STAGE_VERSION, contract_hash, [records.sha256], {})
    cached = store.manifest("aggregates", key)
    if cached is not None:
        return cached
    spec = RecordSpec.from_contract(contract)
    frames = []
    for part in records.parts:
        stats = batch_stats(store.read_part(part), spec, contract)
        frames.append(pl.DataFrame([stats_row(group, s) for group, s in stats.items()]))
    return store.publish("aggregates", key, frames, extra=dict(records.extra))


def stored_aggregates(
    store: Store,
    contract: Any,
    aggregates: Manifest,
    records: Manifest,
    *,
    shown_path: str | None = None,
) -> Aggregates:
    """Merge the stored per-part statistics (the first step of the `summary` stage).
    `shown_path` names the dataset in the report (a cached stage keeps the path it was
    first published under)."""
    merged: dict[str, GroupStats] = {}
    for part in aggregates.parts:
        rows = dict(stats_from_row(row) for row in store.read_part(part).iter_rows(named=True))
        merged = merge_groups(merged, rows)
    extra = records.extra
    result = _aggregates(
        merged,
        RecordSpec.from_contract(contract),
        shown_path or extra["path"],
        extra["hash"],
        extra["files"],
    )
    if records.rows <= INLINE_RECORDS:
        result.records = _records_json(store.read(records), RecordSpec.from_contract(contract))
    else:
        result.records_artifact = {
            "uri": records.uri,
            "path": store.stage_prefix(records.stage, records.key),
            "sha256": records.sha256,
            "rows": records.rows,
        }
    return result


def _utc_text(moment: datetime) -> str:
    """ISO 8601 in UTC with `Z` and no trailing zeros in the fraction. Records keep UTC
    instants, so an offset written in the input (`+02:00`) is shown converted."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def _records_json(table: pl.DataFrame, spec: RecordSpec) -> list[dict[str, Any]]:
    """Normalized records in DecGuard's record shape (all fields, canonical order)."""
    out = []
    for row in table.iter_rows(named=True):
        timestamp = row["timestamp"]
        out.append(
            {
                "id": row["id"],
                "timestamp": None if timestamp is None else _utc_text(timestamp),
                "decision": spec.decision,
                "input": row["input_text"]
                if row["input_json"] is None
                else json.loads(row["input_json"]),
                "probabilities": row["probabilities"],
                "selected": row["selected"],
                "confidence": row["confidence"],
                "backend": row["backend"],
                "model": row["model"],
                "model_version": row["model_version"],
                "outcome": row["outcome"],
                "outcome_correct": row["outcome_correct"],
                "latency_ms": row["latency_ms"],
                "cost": row["cost"],
                "action": row["action"],
                "fallback": row["fallback"],
                "metadata": json.loads(row["metadata_json"]),
            }
        )
    return out


# -- baseline ------------------------------------------------------------------------------


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


def load_baseline(contract: Any, source: str) -> Baseline:
    """A baseline: a records source (file, folder, glob) or an earlier check report
    (DecGuard's or decflow's), whose records are re-normalized under this contract."""
    report = _is_report(Path(source))
    if report is None:
        aggregates = aggregate_records(contract, source, shown_path=source)
        n_bins, threshold = _settings(contract)
        metrics = production_metrics(aggregates.overall, n_bins, threshold)
        block = {
            "source": "dataset",
            "path": source,
            "hash": aggregates.hash,
            "n_records": aggregates.overall.total,
            "metrics": metrics,
        }
        return Baseline(block, metrics)
    return _baseline_from_report(contract, source, report)


def _baseline_from_report(contract: Any, source: str, report: dict[str, Any]) -> Baseline:
    import hashlib

    name = (report.get("contract") or {}).get("name")
    if name is not None and name != contract.decision.name:
        raise DatasetError(
            f"{source}: the baseline report is for decision '{name}', "
            f"not '{contract.decision.name}'"
        )
    file_hash = "sha256:" + hashlib.sha256(Path(source).read_bytes()).hexdigest()
    records = report.get("records")
    n_bins, threshold = _settings(contract)
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
        "source": "report",
        "path": source,
        "hash": file_hash,
        "n_records": n_records,
        "metrics": metrics,
    }
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


# -- summary -------------------------------------------------------------------------------


def contract_block(contract: Any, path: str | None, contract_hash: str | None) -> dict[str, Any]:
    decision = contract.decision
    return {
        "name": decision.name,
        "type": decision.type,
        "labels": list(decision.labels),
        "schema_version": getattr(contract, "schema_version", "0.1"),
        "hash": contract_hash,
        "path": path,
    }


def config_block(production: Any) -> dict[str, Any]:
    return {
        "segments": [key.strip() for key in production.segments],
        "requirements": gate_settings(production.requirements, PRODUCTION_GATES),
        "warnings": gate_settings(production.warnings, PRODUCTION_GATES),
        "segment_requirements": gate_settings(production.segment_requirements, SEGMENT_GATES),
        "segment_warnings": gate_settings(production.segment_warnings, SEGMENT_GATES),
    }


def _segment_entries(
    contract: Any, aggregates: Aggregates
) -> tuple[list[dict[str, Any]], list[Check]]:
    n_bins, threshold = _settings(contract)
    entries: list[dict[str, Any]] = []
    all_checks: list[Check] = []
    for key, groups in aggregates.segments.items():
        for token in sorted(groups):
            metrics = production_metrics(groups[token], n_bins, threshold)
            checks = segment_checks(
                contract.production, f"{key}={segment_display(token)}", metrics
            )
            status, _ = status_of(checks)
            entries.append(
                {
                    "key": key,
                    "value": segment_value(token),
                    "metrics": metrics,
                    "checks": [c.to_dict() for c in checks],
                    "status": status,
                }
            )
            all_checks += checks
    return entries, all_checks


def summarize(
    contract: Any,
    aggregates: Aggregates,
    baseline: Baseline | None = None,
    *,
    contract_path: str | None = None,
    contract_hash: str | None = None,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The `summary` stage: metrics, drift, gates and segments → the check report."""
    n_bins, threshold = _settings(contract)
    metrics = production_metrics(aggregates.overall, n_bins, threshold)
    drift_values = drift(metrics, None if baseline is None else baseline.metrics)
    checks = aggregate_checks(contract.production, metrics, drift_values)
    segments, segment_check_list = _segment_entries(contract, aggregates)
    checks += segment_check_list
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    evaluation = contract.evaluation
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "decflow_version": __version__,
        "kind": "check",
        "created_at": now_iso(),
        "status": status,
        "exit_code": exit_code,
        "contract": contract_block(contract, contract_path, contract_hash),
        "evaluation": {
            "confidence_threshold": evaluation.confidence_threshold,
            "calibration_bins": evaluation.calibration_bins,
            "probability_tolerance": evaluation.probability_tolerance,
            "max_concurrency": evaluation.max_concurrency,
        },
        "config": config_block(contract.production),
        "dataset": {
            "path": aggregates.path,
            "hash": aggregates.hash,
            "n_records": aggregates.overall.total,
            "n_outcomes": aggregates.overall.with_outcome,
            "n_correctness": aggregates.overall.with_correctness,
            "partitions": len(aggregates.files),
        },
        "baseline": None if baseline is None else baseline.block,
        "metrics": metrics,
        "drift": drift_values,
        "segments": segments,
        "checks": [c.to_dict() for c in checks],
        "records_inline": aggregates.records is not None,
    }
    if aggregates.records is not None:
        report["records"] = aggregates.records
    elif aggregates.records_artifact is not None:
        report["records_artifact"] = aggregates.records_artifact
    return report


def check_records(
    contract: Any,
    source: str | Path | list[str | Path],
    baseline: str | None = None,
    *,
    contract_path: str | None = None,
    contract_hash: str | None = None,
    fail_on_warn: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the whole production check in-process and return the report."""
    aggregates = aggregate_records(contract, source, shown_path=str(source), progress=progress)
    loaded_baseline = None if baseline is None else load_baseline(contract, baseline)
    return summarize(
        contract,
        aggregates,
        loaded_baseline,
        contract_path=contract_path,
        contract_hash=contract_hash,
        fail_on_warn=fail_on_warn,
    )
