"""The production check as three stages: `records` → `aggregates` → `summary`.

- `records`: per unit of the source (`data.record_units`: files or Parquet row groups),
  read and validate every record, one batch at a time, and reduce them to mergeable
  statistics (`metrics.production`) for the whole unit and every segment value, plus the
  hashes of their ids (`pipeline.check_units`).
- `aggregates`: check ids across all units and merge their statistics.
- `summary`: final metrics, drift against the baseline, gates, segments → the report.

`check_records` runs them in-process, the units on all cores; `stage_unit` (one task per
unit), `stage_aggregates` and `stored_aggregates` + `summarize` are the same steps through
the store, which holds the units' statistics and id hashes — never a copy of the records:
inputs are identified by the sha256 of their bytes and read where they are.

The report carries the records inline up to `INLINE_RECORDS` (like DecGuard's, read again
from the source for the report); larger inputs are named by path and hash
(`records_inline: false`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

import decflow
from decflow.data.record_rules import inline_json
from decflow.data.record_units import UNIT_BYTES, UNIT_ROWS, Unit, suffix
from decflow.data.records import (
    RecordReader,
    RecordSpec,
    list_partitions,
    normalize_objects,
    segment_display,
    segment_value,
)
from decflow.errors import DatasetError, ReportError
from decflow.gates.calibration import smooth_ece_checks
from decflow.gates.checks import Check, Level, status_of
from decflow.gates.headline import headline
from decflow.gates.production import (
    NO_RECORDS,
    PRODUCTION_GATES,
    SEGMENT_GATES,
    aggregate_checks,
    gate_settings,
    segment_checks,
)
from decflow.metrics.calibration import calibration_section
from decflow.metrics.production import (
    GroupStats,
    Metrics,
    drift,
    merge_groups,
    partition_stats,
    percentile_method,
    production_metrics,
    sketched,
    stats_frame,
    stats_from_frame,
)
from decflow.metrics.quantiles import EXACT_LIMIT
from decflow.metrics.smooth_ece import PRODUCTION_NODES, CalibrationGrid, stored_grid
from decflow.pipeline.production.statistics import (
    Aggregates,
    BatchStats,
    aggregates_of,
    binning,
)
from decflow.pipeline.production.units import (
    SourcePlan,
    UnitAggregates,
    aggregate_unit,
    aggregate_units,
    any_repeats,
    combine_pieces,
    in_parallel,
    in_processes,
    merge_in_memory,
    merge_units,
    plan_source,
    split_buckets,
    stored_bucket,
    unit_stats,
    write_unit,
)
from decflow.pipeline.stage import Progress
from decflow.report.versions import REPORT_VERSION
from decflow.store.remote import is_url
from decflow.store.runs import now_iso

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.gates import Production
    from decflow.store.store import Manifest, Store

INLINE_RECORDS = 10_000


def aggregate_records(
    contract: Contract,
    source: str | Path | list[str | Path],
    *,
    shown_path: str | None = None,
    progress: Progress | None = None,
) -> Aggregates:
    """Stages `records` and `aggregates` in this process; `progress(records so far, None)`
    as they are read. One file is read once, in one pass (hashed on the way); several
    files, or a Parquet file large enough to split, are planned and their units read on
    all cores."""
    spec = RecordSpec.from_contract(contract)
    path = shown_path or str(source)
    files = list_partitions(source)
    if len(files) == 1 and not _splits(files[0]):
        return _one_pass(contract, spec, files, path, progress)
    plan = plan_source(files, path)
    report = None if progress is None else (lambda n: progress(n, None))
    results = aggregate_units(plan.units, spec, BatchStats.of(spec, contract), report)
    merged = merge_in_memory(results, spec)
    aggregates = aggregates_of(merged, spec, plan.path, plan.hash, plan.files)
    if aggregates.overall.total <= INLINE_RECORDS:
        aggregates.records = _records_json(
            RecordReader((), spec, parts=[p for u in plan.units for p in u.parts]).read_all(),
            spec,
        )
    return aggregates


def _splits(file: Path | str) -> bool:
    """Whether a single file is split into several units (a large Parquet or JSONL file)."""
    if suffix(file) == ".jsonl":
        from decflow.store.remote import filesystem, is_url

        if isinstance(file, str) and is_url(file):
            fs, inner = filesystem(file)
            return bool(fs.size(inner) > UNIT_BYTES)
        return Path(file).stat().st_size > UNIT_BYTES
    if suffix(file) != ".parquet":
        return False
    import polars

    from decflow.store.remote import polars_options

    try:
        scan = polars.scan_parquet(file, storage_options=polars_options(str(file)))
        rows = scan.select(polars.len()).collect().item()
    except (polars.exceptions.PolarsError, OSError):
        return False  # reading it reports the problem
    return bool(rows > UNIT_ROWS)


def _one_pass(
    contract: Contract, spec: RecordSpec, files: list[Path | str], path: str,
    progress: Progress | None,
) -> Aggregates:
    reader = RecordReader(files, spec)
    merged: dict[str, GroupStats] = {}
    kept: list[pl.DataFrame] | None = []
    for batch in reader.batches():
        merged = merge_groups(merged, BatchStats.of(spec, contract)(batch.table))
        if progress:
            progress(reader.n_records, None)
        if kept is not None:
            kept = [*kept, batch.table] if reader.n_records <= INLINE_RECORDS else None
    aggregates = aggregates_of(merged, spec, path, reader.dataset_hash, [str(f) for f in files])
    if kept:
        aggregates.records = _records_json(pl.concat(kept), spec)
    return aggregates


# -- the same stages through the store ------------------------------------------------------

STAGE_VERSION = "4"  # 4: statistics carry the SmoothECE grid


def stage_unit(
    unit: Unit, store_url: str, contract: Contract, contract_hash: str
) -> dict[str, Any]:
    """The `records` stage of one unit: its statistics and id hashes in
    `stages/records/<key>/` of the store at `store_url`, keyed by the contract and the
    bytes the unit reads (and the number of records before it, which default ids count).
    Returns the manifest (as a dict), or `{"error": …}` for a unit with a bad record
    (nothing is published then; the merge reports the first problem in file order)."""
    from decflow.store.store import Store

    store = Store(store_url)
    key = _unit_key(unit, contract_hash)
    cached = store.cached("records", key)
    if cached is not None:
        return cached.to_dict()
    spec = RecordSpec.from_contract(contract)
    result = aggregate_unit(unit, spec, BatchStats.of(spec, contract))
    return _publish_unit(store, key, result, keep_ids=False)[0]


def _unit_key(unit: Unit, contract_hash: str) -> str:
    import polars

    from decflow.store.store import stage_key

    params = {"unit": unit.identity(), "offset": unit.offset, "polars": polars.__version__,
              "exact_limit": EXACT_LIMIT}
    return stage_key("records", STAGE_VERSION, contract_hash, [], params)


def _publish_unit(
    store: Store, key: str, result: UnitAggregates, keep_ids: bool
) -> tuple[dict[str, Any], UnitAggregates | None]:
    """A unit's manifest (as a dict) once its result is published, or its error; and the
    result itself (without the id hashes unless `keep_ids`; None for an error)."""
    if result.error is not None:
        return {"error": result.error, "unit": result.unit.index}, None
    parts = write_unit(store, store.stage_prefix("records", key), result)
    extra = {"unit": result.unit.index, "n_records": result.n_records,
             "segment_problems": result.segment_problems}
    manifest = store.publish("records", key, [], parts=parts, extra=extra).to_dict()
    if not keep_ids:
        result.id_hashes = None
    return manifest, result


# Up to this many records, a check in one process keeps the units' id hashes it computed
# (8 bytes a record) for the merge instead of reading them back from the store.
HELD_ID_RECORDS = 20_000_000


@dataclass
class StagedRecords:
    """The `records` stage of every unit: manifests as dicts (or errors), and what this
    process computed (None for a cached unit), which `stage_aggregates` merges without
    reading it back from the store."""

    outcomes: list[dict[str, Any]]
    held: list[UnitAggregates | None]


def stage_records(
    store: Store,
    contract: Contract,
    contract_hash: str,
    plan: SourcePlan,
    *,
    progress: Progress | None = None,
) -> StagedRecords:
    """`stage_unit` of every unit of the plan, in this process: units found in the store are
    not read; the others are read on all cores, JSONL units block by block
    (`Unit.pieces`), and each is published as soon as its pieces are read."""
    spec = RecordSpec.from_contract(contract)
    n_records = sum(u.n_records for u in plan.units)
    keys = [_unit_key(unit, contract_hash) for unit in plan.units]
    cached = [store.cached("records", key) for key in keys]
    pieces = [unit.pieces() if manifest is None else []
              for unit, manifest in zip(plan.units, cached, strict=True)]
    results = in_parallel(aggregate_unit, [p for unit in pieces for p in unit], spec,
                          BatchStats.of(spec, contract), processes=in_processes(plan.units))
    staged = StagedRecords([], [])
    done = 0
    for unit, key, manifest, own in zip(plan.units, keys, cached, pieces, strict=True):
        if manifest is None:
            result = combine_pieces(unit, [next(results) for _ in own])
            outcome, held = _publish_unit(store, key, result, n_records <= HELD_ID_RECORDS)
        else:
            outcome, held = manifest.to_dict(), None
        staged.outcomes.append(outcome)
        staged.held.append(held)
        done += outcome.get("extra", {}).get("n_records", 0)
        if progress:
            progress(done, None)
    return staged


def stage_aggregates(
    store: Store, contract: Contract, contract_hash: str, plan: SourcePlan,
    outcomes: list[dict[str, Any]], held: list[UnitAggregates | None] | None = None,
) -> Manifest:
    """Merge the units' statistics after checking ids across all of them (see
    `pipeline.check_units`); `stages/aggregates/<key>/` holds one row per group. `held`:
    what this process computed of each unit (`StagedRecords`), used instead of the store's
    copy."""
    return stage_aggregates_merged(store, contract, contract_hash, plan, outcomes, held)[0]


def stage_aggregates_merged(
    store: Store, contract: Contract, contract_hash: str, plan: SourcePlan,
    outcomes: list[dict[str, Any]], held: list[UnitAggregates | None] | None = None,
) -> tuple[Manifest, dict[str, GroupStats] | None]:
    """`stage_aggregates`, and the merged statistics when they were merged here (None for
    a cached stage), for a summary in this process that need not read them back."""
    from decflow.store.store import Manifest, stage_key

    spec = RecordSpec.from_contract(contract)
    errors = [o.get("error") for o in outcomes]
    stored = [
        (Manifest.from_dict(o), None if held is None else held[i])
        for i, o in enumerate(outcomes) if "error" not in o
    ]
    manifests = [m for m, _ in stored]
    # the files are part of the key: the stage names them, and reads small inputs again
    key = stage_key("aggregates", STAGE_VERSION, contract_hash,
                    [m.sha256 for m in manifests], {"files": plan.files})
    if all(e is None for e in errors):
        cached = store.cached("aggregates", key)
        if cached is not None:
            return cached, None

    def buckets() -> Callable[[int], list[np.ndarray]]:
        split = [None if h is None or h.id_hashes is None else split_buckets(h.id_hashes)
                 for _, h in stored]
        return lambda b: [
            a for (m, _), s in zip(stored, split, strict=True)
            for a in (stored_bucket(store, m, b) if s is None else [s[b]])
        ]

    merged = merge_units(
        plan.units, spec, errors,
        [dict(m.extra.get("segment_problems") or {}) for m in manifests],
        lambda: [unit_stats(store, m) if h is None else h.stats for m, h in stored],
        lambda: any_repeats(buckets()),
    )
    aggregates_of(merged, spec, plan.path, plan.hash, plan.files)  # an empty source is an error
    extra = {"path": plan.path, "hash": plan.hash, "files": plan.files,
             "n_records": merged[""].total, "units": len(plan.units)}
    return store.publish("aggregates", key, stats_frame(merged), extra=extra), merged


def stored_aggregates(
    store: Store,
    contract: Contract,
    aggregates: Manifest,
    *,
    shown_path: str | None = None,
    merged: dict[str, GroupStats] | None = None,
) -> Aggregates:
    """The merged statistics of the `aggregates` stage (the first step of `summary`), read
    from the store unless given (`merged`, as `stage_aggregates_merged` published them).
    `shown_path` names the dataset in the report (a cached stage keeps the path it was
    first published under). Records of a small input are read again to inline them, and
    must still hash as they did."""
    if merged is None:
        merged = stats_from_frame(store.read(aggregates))
    spec = RecordSpec.from_contract(contract)
    extra = aggregates.extra
    result = aggregates_of(merged, spec, shown_path or extra["path"], extra["hash"], extra["files"])
    if result.overall.total <= INLINE_RECORDS:
        reader = RecordReader(extra["files"], spec)
        table = reader.read_all()
        if reader.dataset_hash != extra["hash"]:
            raise DatasetError(
                f"{result.path}: the records changed since their statistics were computed; "
                "run the check again"
            )
        result.records = _records_json(table, spec)
    return result


def _utc_texts(moments: pl.Expr) -> pl.Expr:
    """ISO 8601 in UTC with `Z` and no trailing zeros in the fraction, written by polars: an
    input's offset can move a valid instant into year 0 or 10000 in UTC, which Python's
    datetime cannot hold. Records keep UTC instants, so an offset written in the input
    (`+02:00`) is shown converted."""
    micro = moments.dt.microsecond()
    fraction = pl.when(micro > 0).then(
        pl.lit(".") + micro.cast(pl.String).str.zfill(6).str.strip_chars_end("0")
    ).otherwise(pl.lit(""))
    return moments.dt.to_string("%Y-%m-%dT%H:%M:%S") + fraction + pl.lit("Z")


def _records_json(table: pl.DataFrame, spec: RecordSpec) -> list[dict[str, Any]]:
    """Normalized records in DecGuard's record shape (all fields, canonical order)."""
    out = []
    table = table.with_columns(_utc_texts(pl.col("timestamp")).alias("timestamp"))
    for row in table.iter_rows(named=True):
        out.append(
            {
                "id": row["id"],
                "timestamp": row["timestamp"],
                "decision": spec.decision,
                "input": row["input_text"]
                if row["input_json"] is None
                else inline_json(row["input_json"]),
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
                "metadata": inline_json(row["metadata_json"]),
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


def load_baseline(contract: Contract, source: str, store: Store | None = None) -> Baseline:
    """A baseline: a records source (file, folder, glob) or an earlier check report
    (DecGuard's or decflow's), whose records are re-normalized under this contract; or,
    when `source` names no file or folder, a check run in `store` (`accepted`: the check
    run accepted for the decision)."""
    if store is not None and not names_records(source):
        from decflow.pipeline.stored.check_runs import stored_check

        run_id, stored, report_hash = stored_check(store, source, contract.decision.name)
        return _baseline_from_report(contract, f"run {run_id}", stored, report_hash,
                                     run_id=run_id)
    report = _is_report(Path(source))
    if report is None:
        aggregates = aggregate_records(contract, source, shown_path=source)
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
    return _baseline_from_report(contract, source, report, file_sha256(Path(source)))


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


# -- summary -------------------------------------------------------------------------------


def contract_block(
    contract: Contract, path: str | None, contract_hash: str | None
) -> dict[str, Any]:
    decision = contract.decision
    return {
        "name": decision.name,
        "type": decision.type,
        "labels": list(decision.labels),
        "schema_version": getattr(contract, "schema_version", "0.1"),
        "hash": contract_hash,
        "path": path,
    }


def production_calibration(
    production: Any, overall: GroupStats, metrics: Metrics
) -> tuple[dict[str, Any], list[Check]]:
    """The report's `calibration` section (noise floor of the binned ECE, SmoothECE from the
    merged grid) and the `max_smooth_ece` checks of requirements and warnings."""
    grid = overall.smooth or CalibrationGrid.of([], [], PRODUCTION_NODES)
    source = stored_grid(grid)
    calibration = metrics["calibration"]
    levels: list[tuple[Level, Any]] = [("requirement", production.requirements),
                                       ("warning", production.warnings)]
    limits: dict[str, float] = {level: gates.max_ece for level, gates in levels
                                if gates.max_ece is not None}
    section = calibration_section(calibration["reliability"], calibration["ece"], source,
                                  max_ece=limits)
    checks = smooth_ece_checks(source, overall.with_correctness, levels,
                               reason_if_empty=NO_RECORDS)
    return section, checks


def config_block(production: Production) -> dict[str, Any]:
    return {
        "segments": [key.strip() for key in production.segments],
        "requirements": gate_settings(production.requirements, PRODUCTION_GATES),
        "warnings": gate_settings(production.warnings, PRODUCTION_GATES),
        "segment_requirements": gate_settings(production.segment_requirements, SEGMENT_GATES),
        "segment_warnings": gate_settings(production.segment_warnings, SEGMENT_GATES),
    }


def _segment_entries(
    contract: Contract, aggregates: Aggregates
) -> tuple[list[dict[str, Any]], list[Check]]:
    n_bins, threshold = binning(contract)
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


def _sketched(aggregates: Aggregates) -> list[str]:
    names = sketched(aggregates.overall)
    for key, groups in aggregates.segments.items():
        for token in sorted(groups):
            prefix = f"segment[{key}={segment_display(token)}]."
            names += [prefix + name for name in sketched(groups[token])]
    return names


def summarize(
    contract: Contract,
    aggregates: Aggregates,
    baseline: Baseline | None = None,
    *,
    contract_path: str | None = None,
    contract_hash: str | None = None,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    """The `summary` stage: metrics, drift, gates and segments → the check report."""
    n_bins, threshold = binning(contract)
    metrics = production_metrics(aggregates.overall, n_bins, threshold)
    drift_values = drift(metrics, None if baseline is None else baseline.metrics)
    checks = aggregate_checks(contract.production, metrics, drift_values)
    calibration, smooth_checks = production_calibration(contract.production, aggregates.overall,
                                                        metrics)
    checks += smooth_checks
    segments, segment_check_list = _segment_entries(contract, aggregates)
    checks += segment_check_list
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    evaluation = contract.evaluation
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "decflow_version": decflow.__version__,
        "kind": "check",
        "created_at": now_iso(),
        "status": status,
        "exit_code": exit_code,
        "headline": headline(status, checks),
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
        "calibration": calibration,
        "drift": drift_values,
        "segments": segments,
        "checks": [c.to_dict() for c in checks],
        "percentiles": percentile_method(_sketched(aggregates)),
        "records_inline": aggregates.records is not None,
    }
    if aggregates.records is not None:
        report["records"] = aggregates.records
    return report


def check_records(
    contract: Contract,
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
