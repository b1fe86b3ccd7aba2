"""The `summary` and `report` stages: metrics, diagnostics, property summaries and checks →
the report, stored as `runs/<run_id>/report.json`; the checks table is the summary's
artifact and its manifest carries the verdict (status, exit code, report path).

`build_report` reads only stored artifacts and the contract it is given, so the same code
produces the report of a fresh run and re-gates a stored run with an edited contract.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import polars as pl

from decflow.gates import Check, headline, reported_limits, status_of
from decflow.gates.golden_evidence import golden_gate_evidence
from decflow.pipeline.contract_run.call_cache import cache_section
from decflow.pipeline.contract_run.diagnostics_section import diagnostics_section
from decflow.pipeline.contract_run.golden_section import (
    calibration_summary,
    golden_arrays,
    golden_cases,
    golden_summary,
    originals,
    plain_numbers,
    prepared_answers,
    prepared_case_results,
    written_case_json,
)
from decflow.pipeline.contract_run.later_stages import SUMMARY_UPSTREAM
from decflow.pipeline.contract_run.qualifiers import run_qualifiers
from decflow.pipeline.contract_run.results import WRITTEN_RESULTS, phase_result_parts
from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stage import RunContext
from decflow.redaction import redact
from decflow.report.model import (
    ArtifactRef,
    Calibration,
    CheckRow,
    Diagnostics,
    Health,
    QualifierRow,
    RunRef,
)
from decflow.report.run_report import (
    CallCacheUse,
    GoldenGateEvidence,
    GoldenMetrics,
    Properties,
    RunBackend,
    RunContract,
    RunDataset,
    RunEvaluation,
    RunReport,
    Sequential,
)
from decflow.report.versions import RUN_REPORT_VERSION
from decflow.store.runs import report_path, write_report
from decflow.store.store import Manifest, Store
from decflow.version import __version__

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract

CHECKS_SCHEMA = pl.Schema({
    "gate": pl.String,
    "level": pl.String,
    "metric": pl.String,
    "comparison": pl.String,
    "threshold": pl.Float64,
    "value": pl.Float64,
    "status": pl.String,
    "message": pl.String,
})


def artifact_ref(store: Store, manifest: Manifest) -> ArtifactRef:
    return ArtifactRef(uri=manifest.uri, path=store.stage_prefix(manifest.stage, manifest.key),
                       sha256=manifest.sha256, rows=manifest.rows)


def model_version(results: pl.DataFrame) -> str | None:
    versions = results["model_version"].drop_nulls().unique().to_list()
    return versions[0] if len(versions) == 1 else None


def _model_versions(store: Store, manifest: Manifest, originals: pl.DataFrame) -> pl.DataFrame:
    """The distinct model versions of every result: those of the originals' results (read
    already), the transformed results' read part by part."""
    frames = [store.read_part(p, ["model_version"]).unique()
              for p in phase_result_parts(manifest, "transformed").parts]
    if "model_version" in originals.columns:
        frames.append(originals.select("model_version").unique())
    return pl.concat(frames).unique() if frames else pl.DataFrame({"model_version": []})


def build_report(
    loaded: LoadedContract,
    spec: RunSpec,
    store: Store,
    manifests: dict[str, Manifest],
    *,
    fail_on_warn: bool = False,
) -> RunReport:
    return build_report_to_write(loaded, spec, store, manifests, fail_on_warn=fail_on_warn)[0]


def build_report_to_write(
    loaded: LoadedContract,
    spec: RunSpec,
    store: Store,
    manifests: dict[str, Manifest],
    *,
    fail_on_warn: bool,
    held: Mapping[str, tuple[str, pl.DataFrame]] | None = None,
) -> tuple[RunReport, bool]:
    """(`build_report`, whether its per-case lists' numbers are `plain_numbers`: the
    hint `write_report` takes). `held`: result chunks this process wrote (`Store.read`)."""
    contract = loaded.contract
    cases_manifest, results_manifest = manifests["cases"], manifests["results"]
    cases = store.read(cases_manifest)
    # The transformed results are read by the sections that use them.
    results = store.read(phase_result_parts(results_manifest, "originals"), held=held)
    backend_info = dict(results_manifest.extra["backend"])
    table = originals(cases, results)
    mode = spec.run_mode
    gated = mode.fills("golden_gates")
    arrays = golden_arrays(table, tuple(contract.decision.labels))
    metrics, checks = golden_summary(contract, arrays, with_gates=gated)
    calibration, smooth_checks = calibration_summary(contract, arrays, metrics, with_gates=gated)
    checks.extend(smooth_checks)
    properties = None
    if mode.fills("properties"):
        from decflow.pipeline.contract_run.properties_section import properties_section

        properties = properties_section(loaded, spec, store, manifests, table)
        checks.extend(properties.pop("checks"))
    diagnostics, checks = diagnostics_section(
        loaded, spec, store, manifests, table, properties, checks
    )
    sequential = results_manifest.extra.get("sequential")
    if sequential is not None:
        from decflow.pipeline.contract_run.sequential.summary import sequential_report

        checks, sequential = sequential_report(contract, spec, store, manifests, table, checks,
                                               sequential)
    judged = [Check.from_dict(c) for c in checks]
    status, exit_code = status_of(judged, fail_on_warn=fail_on_warn)
    gate_evidence = (golden_gate_evidence(metrics, contract.requirements, contract.warnings)
                     if gated else [])
    qualifiers = run_qualifiers(status, judged, gate_evidence, properties, sequential)
    case_results, failures = golden_cases(
        contract, table, backend_info, prepared_case_results(cases_manifest),
        prepared_answers(contract, backend_info,
                         phase_result_parts(results_manifest, "originals"), held))
    cache_use = cache_section(contract, spec, store, manifests)
    evaluation = contract.evaluation
    dataset = cases_manifest.extra
    health = results_manifest.extra.get("health")
    report = RunReport(
        report_version=RUN_REPORT_VERSION,
        decflow_version=__version__,
        created_at=spec.created_at,
        mode=spec.mode,
        status=status,
        exit_code=exit_code,
        headline=headline(status, judged, qualifiers=qualifiers),
        qualifiers=[QualifierRow.model_validate(q.to_dict()) for q in qualifiers],
        contract=RunContract(
            name=contract.decision.name,
            type=contract.decision.type,
            labels=list(contract.decision.labels),
            schema_version=contract.schema_version,
            hash=loaded.hash,
            path=spec.contract_path,
        ),
        dataset=RunDataset(
            path=dataset["path"],
            hash=dataset["hash"],
            n_cases=dataset["n_cases"],
            n_labeled=dataset["n_labeled"],
        ),
        backend=RunBackend(
            name=backend_info["name"],
            provider=backend_info["provider"],
            model=backend_info["model"],
            model_version=model_version(_model_versions(store, results_manifest, results)),
            details=backend_info["details"],
        ),
        health=None if health is None else Health.model_validate(health),
        evaluation=RunEvaluation(
            confidence_threshold=evaluation.confidence_threshold,
            calibration_bins=evaluation.calibration_bins,
            probability_tolerance=evaluation.probability_tolerance,
            max_concurrency=spec.max_concurrency or evaluation.max_concurrency,
        ),
        requirements=reported_limits(contract.requirements),
        warnings=reported_limits(contract.warnings),
        metrics=GoldenMetrics.model_validate(metrics),
        calibration=Calibration.model_validate(calibration),
        gate_evidence=[GoldenGateEvidence.model_validate(g) for g in gate_evidence],
        checks=[CheckRow.model_validate(c) for c in checks],
        failures=failures if mode.fills("golden") else [],
        results=case_results,
        properties=None if properties is None else Properties.model_validate(properties),
        diagnostics=None if diagnostics is None else Diagnostics.model_validate(diagnostics),
        sequential=None if sequential is None else Sequential.model_validate(sequential),
        call_cache=None if cache_use is None else CallCacheUse.model_validate(cache_use),
        rounding_seed=spec.rounding_seed if mode.fills("properties")
        or mode.fills("diagnostics") else None,
        run=RunRef(
            id=spec.run_id,
            store=store.location,
            regated_at=None,
            artifacts={name: artifact_ref(store, m) for name, m in manifests.items()},
        ),
    )
    return report, plain_numbers(table)


# The report's per-case lists: every number in them was checked finite when its result was
# stored (probabilities, confidence, latency) or is decoded without NaN (`golden_cases`).
PER_CASE = ("results", "failures")


@contextlib.contextmanager
def _without_collection() -> Iterator[None]:
    """No cyclic garbage collection in the block. The report's per-case lists are hundreds
    of thousands of containers that hold no cycle: the collections their allocation
    triggers walk them again and again and free nothing (~30 ms of a 20k-case summary's
    ~250). Left as it was found (a caller may have it off already)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compute_summary(context: RunContext, key: str) -> Manifest:
    """Build the report from the stored stages, publish its checks, store the report."""
    with _without_collection():
        return _summary(context, key)


def _summary(context: RunContext, key: str) -> Manifest:
    spec, store = context.spec, context.store
    upstream = {name: context.manifests[name] for name in SUMMARY_UPSTREAM
                if name in context.manifests}
    # whatever a backend echoed of a credential leaves no trace in any view of it
    built, plain = build_report_to_write(
        context.loaded, spec, store, upstream, fail_on_warn=context.fail_on_warn,
        held=context.outputs.pop(WRITTEN_RESULTS, None))
    checks = pl.DataFrame(redact([c.to_dict() for c in built.checks]), schema=CHECKS_SCHEMA)
    verdict = redact({"status": built.status, "exit_code": built.exit_code,
                      "headline": built.headline, "report": report_path(spec.run_id)})
    manifest = store.publish("summary", key, checks, extra=verdict)
    assert built.run is not None and built.run.artifacts is not None  # built above
    built.run.artifacts["summary"] = artifact_ref(store, manifest)
    report = redact(built.to_dict())
    made = written_case_json(report["results"])
    write_report(store, spec.run_id, report, per_case=PER_CASE, plain=plain,
                 written=None if made is None else {"results": made})
    context.outputs["report"] = report
    return manifest
