"""The contract run's stages after the calls (`comparisons`, `minimized`, `summary`),
defined without importing their code: each `compute` is `Deferred` (imported on first use),
so a run's first request does not wait for the report, gate and diagnostics modules; the
command line imports them while the backend is called (`load_later_stages`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decflow.pipeline.spec import RunSpec
from decflow.pipeline.stage import Deferred, RunContext, Stage

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

PACKAGE = "decflow.pipeline.contract_run"


def minimize_enabled(spec: RunSpec, contract: Contract) -> bool:
    return spec.minimize if spec.minimize is not None else contract.fuzz.minimize


def _minimize_param(context: RunContext) -> dict[str, Any]:
    return {"minimize": minimize_enabled(context.spec, context.loaded.contract)}


def judges_properties(spec: RunSpec) -> bool:
    """Whether a run compares transformed cases at all (its mode judges properties)."""
    return spec.run_mode.fills("properties")


def _mode(context: RunContext) -> dict[str, Any]:
    return {"mode": context.spec.mode}


COMPARISONS = Stage("comparisons", "1", ("requests", "results"),
                    Deferred[RunSpec](f"{PACKAGE}.comparisons:compute_comparisons"),
                    applies=judges_properties,
                    title="compare transformed answers with the originals")
MINIMIZED = Stage("minimized", "1", ("comparisons",),
                  Deferred[RunSpec](f"{PACKAGE}.comparisons:compute_minimized"),
                  params=_minimize_param, keyed_by_run=True, applies=judges_properties,
                  title="shrink failing transformed cases")
SUMMARY_UPSTREAM = ("cases", "requests", "results", "comparisons", "minimized")
# Recomputed on every run and re-gate: its verdict depends on --fail-on-warn. Keyed by the
# run: a run continuing a finished one (same upstream) publishes its own, never its parent's.
SUMMARY = Stage("summary", "1", SUMMARY_UPSTREAM,
                Deferred[RunSpec](f"{PACKAGE}.summary:compute_summary"), params=_mode,
                cached=False, keyed_by_run=True, verdict=True,
                title="judge the gates, write the report")
LATER_STAGES = (COMPARISONS, MINIMIZED, SUMMARY)


def load_later_stages(spec: RunSpec) -> None:
    """Import the code of the later stages `spec`'s run computes."""
    for stage in LATER_STAGES:
        if stage.applies(spec) and isinstance(stage.compute, Deferred):
            stage.compute.load()
