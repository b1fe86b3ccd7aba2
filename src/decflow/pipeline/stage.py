"""One `Stage` definition that every runner drives.

A stage is a pure function of its upstream manifests: it reads their artifacts, publishes
its own under a key, and returns a small `Manifest`. The key is the sha256 of (stage name,
code version, contract hash, hashes of external inputs and upstream manifests, the
parameters that matter); a stage whose key already has a published manifest is a cache hit.
`run_stage` is the only place that computes a key and looks it up, for the in-process
runner and for the Prefect tasks alike. Stages that call the backend are keyed by run id,
so a fresh run always calls the model; stages that must be recomputed every time (the
summary, which depends on `--fail-on-warn` and re-gating) set `cached=False`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store, stage_key

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract

log = logging.getLogger("decflow")
# Reports long work as (done, total); total None while it is not known (records in files).
Progress = Callable[[int, int | None], None]
# One `Progress` per stage: (stage name, total) -> its progress.
ProgressFactory = Callable[[str, int | None], Progress]


@dataclass(frozen=True)
class StageContext:
    """What a stage may read: the run's spec, the store, the loaded contract and the
    manifests of the stages before it; `progress` reports long work (may be None)."""

    spec: RunSpec
    store: Store
    loaded: LoadedContract
    manifests: Mapping[str, Manifest]
    progress: ProgressFactory | None = None
    fail_on_warn: bool = False  # the summary's verdict: a WARN exits 1
    logger: Any = field(default=log)
    # How the call stage runs its shards: None runs them here, one after the other; the
    # Prefect flow passes a factory that submits them as tasks (see `contract_run.results`).
    shards: Callable[..., Any] | None = None
    # Values a stage hands to the runner besides its artifact (the summary leaves the report).
    outputs: dict[str, Any] = field(default_factory=dict)


def _nothing(_context: StageContext) -> dict[str, Any]:
    return {}


def _no_inputs(_context: StageContext) -> list[str]:
    return []


def _always(_context: StageContext, _cached: Manifest) -> bool:
    return True


def _accept(_context: StageContext, _manifest: Manifest) -> None:
    return None


@dataclass(frozen=True)
class Stage:
    """A stage: its name (in the store, `--from-stage` and Prefect task names), the version
    of its code (bump it when its output changes), the stages it reads, and how to compute
    it. `compute(context, key)` publishes the artifact under `key` and returns its manifest.

    `inputs` gives hashes of external inputs (a dataset file), `params` the settings that
    change the output, `reusable` may refuse a cache hit (e.g. one published for another
    shown path), and `validate` runs on every manifest, cached or computed (e.g. a backend
    refusing label presentations before any call).

    How runners treat it: `cached=False` recomputes it on every run, resume and re-gate;
    `verdict` marks the stage whose manifest carries the run's status and exit code;
    `restart_input` a stage a `--from-stage` restart from a later stage must find stored
    (it is never recomputed then); `sharded` a stage whose `compute` submits its own work
    (the call shards) and so runs in the Prefect flow itself rather than as one task."""

    name: str
    version: str
    upstream: tuple[str, ...]
    compute: Callable[[StageContext, str], Manifest]
    params: Callable[[StageContext], dict[str, Any]] = _nothing
    inputs: Callable[[StageContext], list[str]] = _no_inputs
    reusable: Callable[[StageContext, Manifest], bool] = _always
    validate: Callable[[StageContext, Manifest], None] = _accept
    keyed_by_run: bool = False
    cached: bool = True
    verdict: bool = False
    restart_input: bool = False
    sharded: bool = False

    def key(self, context: StageContext) -> str:
        params = self.params(context)
        if self.keyed_by_run:
            params = {**params, "run_id": context.spec.run_id}
        upstream = [*self.inputs(context),
                    *(context.manifests[name].sha256 for name in self.upstream
                      if name in context.manifests)]
        return stage_key(self.name, self.version, context.loaded.hash, upstream, params)


def run_stage(stage: Stage, context: StageContext) -> Manifest:
    """The stage's manifest: a published one with the same key, else computed now."""
    key = stage.key(context)
    manifest = context.store.cached(stage.name, key) if stage.cached else None
    if manifest is not None and stage.reusable(context, manifest):
        context.logger.info("stage %s: cache hit (%s)", stage.name, key[:12])
    else:
        manifest = stage.compute(context, key)
    stage.validate(context, manifest)
    return manifest
