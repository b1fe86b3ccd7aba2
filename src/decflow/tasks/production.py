"""Production-check tasks: the check's own stages (`decflow.pipeline.production`), run by
`run_stage` exactly as a direct `decflow check` runs them: `records-plan` (hash, count and
split the inputs) → `records`, one task per unit the store does not hold (each validates
its files or row groups into mergeable statistics and id hashes) → `aggregates` (ids
across units, merged statistics) → `summary` (drift against the baseline, gates,
segments; stored as a run) → `report`. Every task loads the contract from `contract`
(an absolute path: workers may run elsewhere); the spec keeps the path as it was given."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import task_run

from decflow.data.record_units import Unit, plan_source
from decflow.pipeline.production.run import check_context
from decflow.pipeline.production.stages import AGGREGATES, CheckSpec, read_unit
from decflow.pipeline.production.summary import SUMMARY
from decflow.pipeline.production.workers import read_units
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import StageContext, UnitOutcome, run_stage
from decflow.store.runs import report_path
from decflow.store.store import Manifest, Store
from decflow.tasks.common import judged, outcome, stage_task


def _context(contract: str, spec: dict[str, Any],
             fail_on_warn: bool = False) -> StageContext[CheckSpec]:
    check = CheckSpec.from_dict(spec)
    return check_context(check, Store(check.store_url), load_contract_cached(contract),
                         read_units, fail_on_warn=fail_on_warn, logger=get_run_logger())


@stage_task("records-plan", "records-plan: hash, count and split the records")
def plan_task(records: str) -> dict[str, Any]:
    """Hash and count the record files and split them into units (small JSON)."""
    return plan_source(records, absolute=True).to_dict()


def _unit_run_name() -> str:
    unit = task_run.parameters["unit"]
    return f"records: read unit {unit['index'] + 1} ({unit['n_records']} records)"


@stage_task("records", _unit_run_name)
def unit_task(contract: str, spec: dict[str, Any], unit: dict[str, Any],
              key: str) -> dict[str, Any]:
    """The `records` stage of one unit: only its files or row groups are read here."""
    return read_unit(_context(contract, spec), Unit.from_dict(unit), key).to_dict()


@stage_task("aggregates", "aggregates: merge the units' statistics and ids")
def aggregates_task(contract: str, spec: dict[str, Any],
                    outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Ids across all units, then the merged statistics (the units as the flow ran them)."""
    context = _context(contract, spec)
    context.unit_outcomes[:] = [UnitOutcome.from_dict(o) for o in outcomes]
    return run_stage(AGGREGATES, context).to_dict()


@stage_task("summary", "summary: judge drift and gates, write the report")
def check_summary_task(contract: str, spec: dict[str, Any], aggregates: dict[str, Any],
                       fail_on_warn: bool = False) -> dict[str, Any] | State[dict[str, Any]]:
    """Judge drift and gates; the report is stored as the spec's run. Failed with the
    headline when a requirement fails (`judged`)."""
    context = replace(_context(contract, spec, fail_on_warn),
                      manifests={"aggregates": Manifest.from_dict(aggregates)})
    run_stage(SUMMARY, context)
    found = outcome(context.outputs["report"], report_path(context.spec.run_id))
    return judged(found["status"], found["headline"], found)
