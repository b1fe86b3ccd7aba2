"""The production check's report: metrics, drift against the baseline, gates, segments and
the inlined records of a small input, built by the `summary` stage (`SUMMARY`), which
stores it as run `runs/<run_id>/` like a contract run, direct or through Prefect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow.data.records.reader import RecordReader, RecordSpec, segment_display, segment_value
from decflow.data.records.rules import inline_json
from decflow.errors import DatasetError
from decflow.gates.calibration import GateLimits, smooth_ece_checks
from decflow.gates.checks import Check, Level, status_of
from decflow.gates.headline import headline
from decflow.gates.production import NO_RECORDS, config_settings
from decflow.gates.production_evidence import check_report_checks, production_gating
from decflow.gates.production_power import point_qualifiers
from decflow.metrics.calibration import calibration_section
from decflow.metrics.production import (
    GroupStats,
    Metrics,
    drift,
    percentile_method,
    production_metrics,
    sketched,
)
from decflow.metrics.smooth_ece import PRODUCTION_NODES, CalibrationGrid, stored_grid
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.production.baseline import Baseline, baseline_found, load_baseline
from decflow.pipeline.production.stages import (
    AGGREGATES,
    CheckContext,
    CheckSpec,
    stored_aggregates,
)
from decflow.pipeline.production.statistics import Aggregates, binning
from decflow.pipeline.production.workers import read_units
from decflow.pipeline.stage import Stage
from decflow.pipeline.stored.check_runs import RECORDS_BACKEND
from decflow.redaction import redact
from decflow.report.check_report import (
    CheckBaseline,
    CheckConfig,
    CheckContract,
    CheckEvaluation,
    CheckMetrics,
    CheckReport,
    Drift,
    Percentiles,
    Records,
    Segment,
)
from decflow.report.model import Calibration, CheckRow, QualifierRow, RunRef
from decflow.report.versions import REPORT_VERSION
from decflow.store.runs import write_report
from decflow.store.store import Manifest, Store
from decflow.version import __version__

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.contracts.gates import Gating, Production

# Up to this many records, the report inlines them (read again from the source).
INLINE_RECORDS = 10_000
CHECKS_SCHEMA = pl.Schema({"gate": pl.String, "level": pl.String, "status": pl.String,
                           "message": pl.String})


def contract_block(
    contract: Contract, path: str | None, contract_hash: str | None
) -> CheckContract:
    decision = contract.decision
    return CheckContract(
        name=decision.name,
        type=decision.type,
        labels=list(decision.labels),
        schema_version=getattr(contract, "schema_version", "0.1"),
        hash=contract_hash,
        path=path,
    )


def production_calibration(
    production: Production, overall: GroupStats, metrics: Metrics
) -> tuple[dict[str, Any], list[Check]]:
    """The report's `calibration` section (noise floor of the binned ECE, SmoothECE from the
    merged grid) and the `max_smooth_ece` checks of requirements and warnings."""
    grid = overall.smooth or CalibrationGrid.of([], [], PRODUCTION_NODES)
    source = stored_grid(grid)
    calibration = metrics["calibration"]
    levels: list[tuple[Level, GateLimits]] = [("requirement", production.requirements),
                                              ("warning", production.warnings)]
    limits: dict[str, float] = {level: limit for level, gates in levels
                                if (limit := gates.limit("max_ece")) is not None}
    section = calibration_section(calibration["reliability"], calibration["ece"], source,
                                  max_ece=limits)
    checks = smooth_ece_checks(source, overall.with_correctness, levels,
                               reason_if_empty=NO_RECORDS)
    return section, checks


def config_block(production: Production, gating: Gating) -> CheckConfig:
    return CheckConfig.model_validate(
        config_settings(production, [key.strip() for key in production.segments], gating))


def _segment_entries(contract: Contract, aggregates: Aggregates) -> list[dict[str, Any]]:
    """Each segment's key, value and metrics, checks still to judge (in `summarize`: evidence
    gating judges every segment's gates as one family)."""
    n_bins, threshold = binning(contract)
    return [{"key": key, "value": segment_value(token),
             "metrics": production_metrics(groups[token], n_bins, threshold)}
            for key, groups in aggregates.segments.items() for token in sorted(groups)]


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
    created_at: str,
    gating: Gating | None = None,
) -> CheckReport:
    """Metrics, drift, gates and segments → the check report; the gates judged by `gating`
    (default: the contract's, `production_gating`; a monitor window passes `evidence`)."""
    n_bins, threshold = binning(contract)
    metrics = production_metrics(aggregates.overall, n_bins, threshold)
    baseline_metrics = None if baseline is None else baseline.metrics
    drift_values = drift(metrics, baseline_metrics)
    gating = gating or production_gating(contract)[0]
    segments = _segment_entries(contract, aggregates)
    checks, per_segment = check_report_checks(contract.production, metrics, drift_values,
                                              segments, gating=gating,
                                              baseline=baseline_metrics)
    calibration, smooth_checks = production_calibration(contract.production, aggregates.overall,
                                                        metrics)
    checks += smooth_checks
    for entry, segment_checks in zip(segments, per_segment, strict=True):
        entry["checks"] = [c.to_dict() for c in segment_checks]
        entry["status"] = status_of(segment_checks)[0]
        checks += segment_checks
    status, exit_code = status_of(checks, fail_on_warn=fail_on_warn)
    qualifiers = point_qualifiers(status, checks, metrics, baseline_metrics, segments)
    evaluation = contract.evaluation
    report = CheckReport(
        report_version=REPORT_VERSION,
        decflow_version=__version__,
        kind="check",
        created_at=created_at,
        status=status,
        exit_code=exit_code,
        headline=headline(status, checks, qualifiers=qualifiers),
        qualifiers=[QualifierRow.model_validate(q.to_dict()) for q in qualifiers],
        contract=contract_block(contract, contract_path, contract_hash),
        evaluation=CheckEvaluation(
            confidence_threshold=evaluation.confidence_threshold,
            calibration_bins=evaluation.calibration_bins,
            probability_tolerance=evaluation.probability_tolerance,
            max_concurrency=evaluation.max_concurrency,
        ),
        config=config_block(contract.production, gating),
        dataset=Records(
            path=aggregates.path,
            hash=aggregates.hash,
            n_records=aggregates.overall.total,
            n_outcomes=aggregates.overall.with_outcome,
            n_correctness=aggregates.overall.with_correctness,
            partitions=len(aggregates.files),
        ),
        baseline=None if baseline is None else CheckBaseline.model_validate(baseline.block),
        metrics=CheckMetrics.model_validate(metrics),
        calibration=Calibration.model_validate(calibration),
        drift=Drift.model_validate(drift_values),
        segments=[Segment.model_validate(entry) for entry in segments],
        checks=[CheckRow.model_validate(c.to_dict()) for c in checks],
        percentiles=Percentiles.model_validate(percentile_method(_sketched(aggregates))),
        records_inline=aggregates.records is not None,
    )
    if aggregates.records is not None:
        report.records = aggregates.records  # written last, as a list of plain records
    return report


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


def records_json(table: pl.DataFrame, spec: RecordSpec) -> list[dict[str, Any]]:
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


def with_records(aggregates: Aggregates, spec: RecordSpec, files: list[str]) -> Aggregates:
    """The records of a small input read again to inline them in the report; they must
    still hash as they did when their statistics were computed."""
    if aggregates.overall.total > INLINE_RECORDS:
        return aggregates
    reader = RecordReader(files, spec)
    table = reader.read_all()
    if reader.dataset_hash != aggregates.hash:
        raise DatasetError(
            f"{aggregates.path}: the records changed since their statistics were computed; "
            "run the check again"
        )
    aggregates.records = records_json(table, spec)
    return aggregates


def _summarize(context: CheckContext, key: str) -> Manifest:
    """The `summary` stage: the report from the merged statistics (as merged in this
    process, else read from the store) and the baseline, stored with run `run_id` (when
    the check is recorded); publishes its checks table, and its manifest the verdict."""
    spec, store, loaded = context.spec, context.store, context.loaded
    records = RecordSpec.from_contract(loaded.contract)
    manifest = context.manifests["aggregates"]
    statistics = with_records(
        stored_aggregates(store, records, manifest, shown_path=spec.records,
                          merged=context.outputs.get("merged")),
        records, spec.plan.files)
    against = None if spec.baseline is None else load_baseline(context, spec.baseline)
    built = summarize(loaded.contract, statistics, against, contract_path=spec.contract_path,
                      contract_hash=loaded.hash, fail_on_warn=context.fail_on_warn,
                      created_at=spec.created_at)
    if spec.run_id:
        built.run = RunRef(id=spec.run_id, store=store.location)
    report = redact(built.to_dict())  # records may hold a credential it names
    verdict: dict[str, Any] = {"status": report["status"], "exit_code": report["exit_code"],
                               "headline": report["headline"]}
    if spec.run_id:
        verdict["report"] = write_report(store, spec.run_id, report)
    context.outputs["report"] = report
    checks = pl.DataFrame([{k: c[k] for k in CHECKS_SCHEMA} for c in report["checks"]],
                          schema=CHECKS_SCHEMA)
    return store.publish("summary", key, checks, extra=verdict)


# Recomputed on every check: its verdict depends on --fail-on-warn and the baseline. Keyed
# by the run: two checks of the same records publish their own (the run records its own).
SUMMARY: Stage[CheckSpec] = Stage("summary", "1", ("aggregates",), _summarize, cached=False,
                                  keyed_by_run=True, verdict=True,
                                  title="judge drift and gates, write the report")


def describe_check(spec: CheckSpec, _manifests: Mapping[str, Manifest]) -> dict[str, Any]:
    """What a check run's record says of it besides the driver's fields."""
    return {"kind": "check", "dataset_hash": spec.plan.hash, "backend": RECORDS_BACKEND,
            "mode": "check"}


def aggregated_check(_store: Store, manifests: Mapping[str, Manifest],
                     _computing: Mapping[str, str] | None) -> bool:
    """Whether a new check an error stopped is worth keeping: only once its records were
    read and merged. Before that the error is in its input (a broken records file, a
    missing baseline), which the user edits and checks again; the partitions read so far
    are keyed by their bytes, so the new check reuses them without a run to resume."""
    return AGGREGATES.name in manifests


# A production check: its units read and merged, then judged (`pipeline/pipeline.py`).
CHECK: Pipeline[CheckSpec] = Pipeline(
    "check", f"{__name__}:CHECK", CheckSpec.from_dict, (AGGREGATES, SUMMARY),
    "decflow.report.check_report:CheckReport",
    describe_check, prepare=baseline_found, local_units=read_units,
    aliases={"report": SUMMARY.name}, kept=aggregated_check)
