"""The production check's stages up to its statistics: `records`, one per unit of the
planned source, and `aggregates`, their merge. One `Stage`, `AGGREGATES`, fans out over
the units (`run_stage` keys and caches each, and the context's `UnitRunner` reads the
missing ones: on all cores in a direct check, as mapped tasks in the Prefect flow) and
merges them after checking ids across all of them. A direct check, the Prefect flow and a
baseline of records all go through it, so the same input gives the same statistics and
keys however it ran; the store holds the units' statistics and id hashes, never a copy of
the records (inputs are identified by the sha256 of their bytes and read where they are).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

import polars

from decflow.data.records.reader import RecordSpec
from decflow.data.records.units import SourcePlan, Unit
from decflow.metrics.production import GroupStats, stats_frame, stats_from_frame
from decflow.metrics.quantiles import EXACT_LIMIT
from decflow.pipeline.production.statistics import (
    Aggregates,
    BatchStats,
    UnitAggregates,
    aggregate_unit,
    aggregates_of,
    any_repeats,
    merge_units,
    split_buckets,
    stored_bucket,
    unit_stats,
    write_unit,
)
from decflow.pipeline.stage import FanOut, Stage, StageContext, UnitOutcome
from decflow.store.runs import now_iso
from decflow.store.store import Manifest, Store

STAGE_VERSION = "4"  # 4: statistics carry the SmoothECE grid


@dataclass(frozen=True)
class CheckSpec:
    """What a production check is asked to do: the contract, the records (`records` as the
    report shows them, `plan` as hashed, counted and split into units), an optional
    baseline, where it is recorded (`run_id`; empty: not recorded, e.g. a baseline's
    statistics) and the finished check it continues (`parent`, `check --resume`)."""

    contract_path: str
    records: str
    store_url: str
    run_id: str
    plan: SourcePlan
    baseline: str | None = None
    created_at: str = field(default_factory=lambda: now_iso())
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"contract_path": self.contract_path, "records": self.records,
                "store_url": self.store_url, "run_id": self.run_id,
                "plan": self.plan.to_dict(), "baseline": self.baseline,
                "created_at": self.created_at, "parent": self.parent}

    def resume_command(self) -> str:
        """The command line that finishes this check after an interruption (the store
        keeps its records' plan and baseline; the paths are as this check was given them)."""
        return " ".join(shlex.quote(part) for part in (
            "decflow", "check", self.contract_path, "--store", self.store_url,
            "--resume", self.run_id))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckSpec:
        return cls(**{**data, "plan": SourcePlan.from_dict(data["plan"])})


CheckContext = StageContext[CheckSpec]


# -- records: one unit ----------------------------------------------------------------------


def _units(context: CheckContext) -> list[Unit]:
    return context.spec.plan.units


def unit_params(unit: Unit) -> dict[str, Any]:
    """What a unit's statistics depend on: the bytes it reads and the records before it
    (default ids count them), never its files' paths (a moved file is still a cache hit)."""
    return {"unit": unit.identity(), "offset": unit.offset, "polars": polars.__version__,
            "exact_limit": EXACT_LIMIT}


def read_unit(context: CheckContext, unit: Unit, key: str) -> UnitOutcome:
    """The `records` stage of one unit, read here (a Prefect task reads only its unit)."""
    spec = RecordSpec.from_contract(context.loaded.contract)
    result = aggregate_unit(unit, spec, BatchStats.of(spec, context.loaded.contract))
    return publish_unit(context.store, key, result, keep_ids=False)


def publish_unit(store: Store, key: str, result: UnitAggregates, *,
                 keep_ids: bool) -> UnitOutcome:
    """A unit's statistics and id hashes published under `stages/records/<key>/`, or its
    error (nothing is published then; the merge reports the first problem in file order).
    The result is held for the merge, without its id hashes unless `keep_ids`."""
    index = result.unit.index
    if result.error is not None:
        return UnitOutcome(index, None, result.error)
    parts = write_unit(store, store.stage_prefix("records", key), result)
    extra = {"unit": index, "n_records": result.n_records,
             "segment_problems": result.segment_problems}
    manifest = store.publish("records", key, [], parts=parts, extra=extra)
    if not keep_ids:
        result.id_hashes = None
    return UnitOutcome(index, manifest, held=result)


# -- aggregates: the merge ------------------------------------------------------------------


def _published(context: CheckContext) -> list[UnitOutcome]:
    return [o for o in context.unit_outcomes if o.manifest is not None]


def _unit_hashes(context: CheckContext) -> list[str]:
    return [o.manifest.sha256 for o in _published(context) if o.manifest is not None]


def _source(context: CheckContext) -> dict[str, Any]:
    """The source's identity (its files' names and bytes), never where it was read from:
    a flow's workers read it by absolute path, a direct check as given."""
    return {"source": context.spec.plan.hash}


def _every_unit_read(context: CheckContext, _cached: Manifest) -> bool:
    """A unit that failed is read again in file order to name the problem: never a hit."""
    return all(o.error is None for o in context.unit_outcomes)


def _merge(context: CheckContext, key: str) -> Manifest:
    """Merge the units' statistics after checking ids across all of them; publishes one row
    per group, and leaves the merged statistics (`outputs["merged"]`) for a summary in
    this process."""
    store, plan = context.store, context.spec.plan
    spec = RecordSpec.from_contract(context.loaded.contract)
    outcomes = context.unit_outcomes
    published = [(o.manifest, o.held) for o in outcomes if o.manifest is not None]

    def buckets(b: int) -> list[Any]:
        return [a for manifest, held in published
                for a in (stored_bucket(store, manifest, b) if _ids(held) is None
                          else [split_buckets(_ids(held))[b]])]

    merged = merge_units(
        plan.units, spec, [o.error for o in outcomes],
        [dict(m.extra.get("segment_problems") or {}) for m, _ in published],
        lambda: [unit_stats(store, m) if held is None else held.stats for m, held in published],
        lambda: any_repeats(buckets),
    )
    aggregates_of(merged, spec, plan.path, plan.hash, plan.files)  # an empty source is an error
    extra = {"path": plan.path, "hash": plan.hash, "files": plan.files,
             "n_records": merged[""].total, "units": len(plan.units)}
    context.outputs["merged"] = merged
    return store.publish("aggregates", key, stats_frame(merged), extra=extra)


def _ids(held: UnitAggregates | None) -> Any:
    return None if held is None else held.id_hashes


def _read_unit_title(unit: Unit) -> str:
    return f"read unit {unit.index + 1} ({unit.n_records} records)"


AGGREGATES: Stage[CheckSpec] = Stage(
    "aggregates", STAGE_VERSION, (), _merge, params=_source, inputs=_unit_hashes,
    reusable=_every_unit_read,
    fan_out=FanOut("records", _units, unit_params, read_unit, _read_unit_title),
    title="merge the units' statistics and ids",
)


def stored_aggregates(
    store: Store,
    spec: RecordSpec,
    aggregates: Manifest,
    *,
    shown_path: str | None = None,
    merged: dict[str, GroupStats] | None = None,
) -> Aggregates:
    """The merged statistics of the `aggregates` stage, read from the store unless given
    (`merged`, as the stage merged them in this process). `shown_path` names the dataset
    in the report (a cached stage keeps the path it was first published under)."""
    if merged is None:
        merged = stats_from_frame(store.read(aggregates))
    extra = aggregates.extra
    return aggregates_of(merged, spec, shown_path or extra["path"], extra["hash"],
                         extra["files"])
