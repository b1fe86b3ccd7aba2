"""The `summary` stage: metrics, diagnostics, property summaries and checks → the report body.

`build_report` reads only stored artifacts and the contract it is given, so the same code
produces the report of a fresh run and re-gates a stored run with an edited contract.
"""

from __future__ import annotations

from typing import Any

import polars as pl

import decflow
from decflow.gates import Check, status_of
from decflow.pipeline.diagnostics_section import diagnostics_section
from decflow.pipeline.golden import golden_cases, golden_summary, originals
from decflow.pipeline.results_stage import phase_result_parts
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store

# decflow/2: persona axes carry the case-level excess (decflow/1 had attributable rates)
REPORT_VERSION = "decflow/2"
GATE_KEYS = (
    "min_accuracy",
    "min_macro_f1",
    "max_nll",
    "max_brier",
    "max_ece",
    "min_coverage",
    "max_abstention_rate",
    "min_selective_accuracy",
    "max_error_rate",
    "max_latency_p95_ms",
    "max_ordinal_mae",
)


def gate_values(gates: Any) -> dict[str, float | None]:
    return {key: getattr(gates, key) for key in GATE_KEYS}


def artifact_ref(store: Store, manifest: Manifest) -> dict[str, Any]:
    return {
        "uri": manifest.uri,
        "path": store.stage_prefix(manifest.stage, manifest.key),
        "sha256": manifest.sha256,
        "rows": manifest.rows,
    }


def model_version(results: pl.DataFrame) -> str | None:
    versions = results["model_version"].drop_nulls().unique().to_list()
    return versions[0] if len(versions) == 1 else None


def _model_versions(store: Store, manifest: Manifest) -> pl.DataFrame:
    """The distinct model versions of every result, read part by part."""
    frames = [store.read_part(p, ["model_version"]).unique() for p in manifest.parts]
    return pl.concat(frames).unique() if frames else pl.DataFrame({"model_version": []})


def build_report(
    loaded: Any,
    spec: RunSpec,
    store: Store,
    manifests: dict[str, Manifest],
    *,
    fail_on_warn: bool = False,
) -> dict[str, Any]:
    contract = loaded.contract
    cases_manifest, results_manifest = manifests["cases"], manifests["results"]
    cases = store.read(cases_manifest)
    # The transformed results are read by the sections that use them.
    results = store.read(phase_result_parts(results_manifest, "originals"))
    backend_info = dict(results_manifest.extra["backend"])
    table = originals(cases, results)
    metrics, checks = golden_summary(contract, table, with_gates=spec.mode in ("test", "all"))
    properties = None
    if spec.mode in ("fuzz", "all"):
        from decflow.pipeline.properties_report import properties_section

        properties = properties_section(loaded, spec, store, manifests, table)
        checks.extend(properties.pop("checks"))
    diagnostics, checks = diagnostics_section(
        loaded, spec, store, manifests, table, properties, checks
    )
    status, exit_code = status_of([Check(**c) for c in checks], fail_on_warn=fail_on_warn)
    case_results, failures = golden_cases(contract, table, backend_info)
    evaluation = contract.evaluation
    dataset = cases_manifest.extra
    return {
        "report_version": REPORT_VERSION,
        "decflow_version": decflow.__version__,
        "created_at": spec.created_at,
        "mode": spec.mode,
        "status": status,
        "exit_code": exit_code,
        "contract": {
            "name": contract.decision.name,
            "type": contract.decision.type,
            "labels": list(contract.decision.labels),
            "schema_version": contract.schema_version,
            "hash": loaded.hash,
            "path": spec.contract_path,
        },
        "dataset": {
            "path": dataset["path"],
            "hash": dataset["hash"],
            "n_cases": dataset["n_cases"],
            "n_labeled": dataset["n_labeled"],
        },
        "backend": {
            "name": backend_info["name"],
            "provider": backend_info["provider"],
            "model": backend_info["model"],
            "model_version": model_version(_model_versions(store, results_manifest)),
            "details": backend_info["details"],
        },
        "health": results_manifest.extra.get("health"),
        "evaluation": {
            "confidence_threshold": evaluation.confidence_threshold,
            "calibration_bins": evaluation.calibration_bins,
            "probability_tolerance": evaluation.probability_tolerance,
            "max_concurrency": spec.max_concurrency or evaluation.max_concurrency,
        },
        "requirements": gate_values(contract.requirements),
        "warnings": gate_values(contract.warnings),
        "metrics": metrics,
        "checks": checks,
        "failures": failures if spec.mode != "fuzz" else [],
        "results": case_results,
        "properties": properties,
        "diagnostics": diagnostics,
        "run": {
            "id": spec.run_id,
            "store": store.location,
            "regated_at": None,
            "artifacts": {name: artifact_ref(store, m) for name, m in manifests.items()},
        },
    }

