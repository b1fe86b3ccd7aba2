"""One `Stage` definition that every runner drives.

A stage is a pure function of its upstream manifests: it reads their artifacts, publishes
its own under a key, and returns a small `Manifest`. The key is the sha256 of (stage name,
code version, contract hash, hashes of external inputs and upstream manifests, the
parameters that matter); a stage whose key already has a published manifest is a cache hit.
`run_stage` is the only place that computes a key and looks it up, for the in-process
runner and for the Prefect tasks alike. Stages that call the backend are keyed by run id,
so a fresh run always calls the model; stages that must be recomputed every time (the
summary, which depends on `--fail-on-warn` and re-gating) set `cached=False`.

A stage may fan out (`FanOut`): its work is split into units (the production check's record
partitions), each published and cached under a key of its own, computed by whatever
`UnitRunner` the context carries (worker processes here, tasks mapped by a Prefect flow),
then merged by the stage's `compute` into its one artifact. Stages are generic in the spec
of what runs them (`RunSpec` for a contract run, `CheckSpec` for a production check).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from decflow import startup
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest, Store, stage_key

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract

log = logging.getLogger("decflow")
# Reports long work as (done, total); total None while it is not known (records in files).
Progress = Callable[[int, int | None], None]
# One `Progress` per stage: (stage name, total) -> its progress.
ProgressFactory = Callable[[str, int | None], Progress]


class Spec(Protocol):
    """What every spec of a run names (`RunSpec`, `CheckSpec`): its run (empty: a run that
    is not recorded, e.g. a baseline's statistics), its contract, where it is stored, the
    finished run it continues (`--resume` of a finished run), itself as small JSON, and the
    command line that finishes it after an interruption."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # a dataclass (`replace` makes variants)

    @property
    def run_id(self) -> str: ...

    @property
    def contract_path(self) -> str: ...

    @property
    def store_url(self) -> str: ...

    @property
    def parent(self) -> str | None: ...

    def to_dict(self) -> dict[str, Any]: ...

    def resume_command(self) -> str: ...


S = TypeVar("S", bound=Spec)
U = TypeVar("U")


@dataclass
class UnitOutcome:
    """One unit of a fanned-out stage: its published manifest, or the error that stopped it
    (nothing is published then); `held` is what this process computed of it, kept for the
    merge instead of reading it back from the store (never sent between processes)."""

    index: int
    manifest: Manifest | None
    error: str | None = None
    held: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "error": self.error,
                "manifest": None if self.manifest is None else self.manifest.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitOutcome:
        manifest = data["manifest"]
        return cls(data["index"], None if manifest is None else Manifest.from_dict(manifest),
                   data["error"])


# A unit a fanned-out stage did not find in the store: (its index among the stage's units,
# the unit, its key).
Missing = tuple[int, Any, str]
# Computes the missing units of a fanned-out stage: (stage, context, missing) -> their
# outcomes, in the order given.
UnitRunner = Callable[["Stage[Any]", "StageContext[Any]", list[Missing]], list[UnitOutcome]]


@dataclass(frozen=True)
class StageContext(Generic[S]):
    """What a stage may read: the run's spec, the store, the loaded contract and the
    manifests of the stages before it; `progress` reports long work (may be None)."""

    spec: S
    store: Store
    loaded: LoadedContract
    manifests: Mapping[str, Manifest]
    progress: ProgressFactory | None = None
    fail_on_warn: bool = False  # the summary's verdict: a WARN exits 1
    logger: Any = field(default=log)
    # How the call stage runs its shards: None runs them here, one after the other; the
    # Prefect flow passes a factory that submits them as tasks (see `contract_run.results`).
    shards: Callable[..., Any] | None = None
    # How a fanned-out stage computes the units it did not find stored (None: it cannot).
    units: UnitRunner | None = None
    # The units of the fanned-out stage under way, in unit order (set by `run_units`).
    unit_outcomes: list[UnitOutcome] = field(default_factory=list)
    # Values a stage hands to the runner besides its artifact (the summary leaves the report).
    outputs: dict[str, Any] = field(default_factory=dict)


def _nothing(_context: StageContext[Any]) -> dict[str, Any]:
    return {}


def _no_inputs(_context: StageContext[Any]) -> list[str]:
    return []


def _always(_context: StageContext[Any], _cached: Manifest) -> bool:
    return True


def _every_spec(_spec: Any) -> bool:
    return True


def _adopts_nothing(_found: Manifest) -> dict[str, Manifest]:
    return {}


def _accept(_context: StageContext[Any], _manifest: Manifest) -> None:
    return None


@dataclass(frozen=True)
class FanOut(Generic[S, U]):
    """How a stage fans out: `units(context)` its units, each published as stage `name`
    under a key made of the contract, the stage's version and `params(unit)` (what the
    unit's output depends on), and computed by `compute(context, unit, key)` when no intact
    artifact has that key."""

    name: str
    units: Callable[[StageContext[S]], Sequence[U]]
    params: Callable[[U], dict[str, Any]]
    compute: Callable[[StageContext[S], U, str], UnitOutcome]
    # What computing one unit does, as a runner names it (`read unit 2 (4 records)`).
    title: Callable[[U], str]


@dataclass(frozen=True)
class Stage(Generic[S]):
    """A stage: its name (in the store, `--from-stage` and Prefect task names), what it
    does (`title`, after the name in a task run's name: `cases: read the golden dataset`),
    the version of its code (bump it when its output changes), the stages it reads, and
    how to compute it. `compute(context, key)` publishes the artifact under `key` and
    returns its manifest. A pipeline orders its stages by `upstream`; `applies` says
    whether a run of that spec computes it at all (a contract run compares transformed
    cases only when its mode judges properties).

    `inputs` gives hashes of external inputs (a dataset file), `params` the settings that
    change the output, `reusable` may refuse a cache hit (e.g. one published for another
    shown path), and `validate` runs on every manifest, cached or computed (e.g. a backend
    refusing label presentations before any call).

    How runners treat it: `cached=False` recomputes it on every run, resume and re-gate;
    `verdict` marks the stage whose manifest carries the run's status and exit code;
    `restart_input` a stage a `--from-stage` restart from a later stage must find stored
    (it is never recomputed then); `sharded` a stage whose `compute` submits its own work
    (the call shards) and so runs in the Prefect flow itself rather than as one task;
    `fan_out` a stage computed unit by unit, then merged (`run_units`); `adopts` the
    manifests the stage's own replaces for the stages after it (a sequential call stage
    hands on the cases and requests it sent)."""

    name: str
    version: str
    upstream: tuple[str, ...]
    compute: Callable[[StageContext[S], str], Manifest]
    params: Callable[[StageContext[S]], dict[str, Any]] = _nothing
    inputs: Callable[[StageContext[S]], list[str]] = _no_inputs
    reusable: Callable[[StageContext[S], Manifest], bool] = _always
    validate: Callable[[StageContext[S], Manifest], None] = _accept
    keyed_by_run: bool = False
    cached: bool = True
    verdict: bool = False
    restart_input: bool = False
    sharded: bool = False
    fan_out: FanOut[S, Any] | None = None
    applies: Callable[[S], bool] = _every_spec
    adopts: Callable[[Manifest], dict[str, Manifest]] = _adopts_nothing
    title: str = field(kw_only=True)

    def key(self, context: StageContext[S]) -> str:
        params = self.params(context)
        if self.keyed_by_run:
            params = {**params, "run_id": context.spec.run_id}
        upstream = [*self.inputs(context),
                    *(context.manifests[name].sha256 for name in self.upstream
                      if name in context.manifests)]
        return stage_key(self.name, self.version, context.loaded.hash, upstream, params)


def unit_key(stage: Stage[S], unit: Any, context: StageContext[S]) -> str:
    """The key of one unit of a fanned-out stage."""
    assert stage.fan_out is not None
    return stage_key(stage.fan_out.name, stage.version, context.loaded.hash, [],
                     stage.fan_out.params(unit))


def run_units(stage: Stage[S], context: StageContext[S]) -> list[UnitOutcome]:
    """Every unit of a fanned-out stage, in unit order: an intact published one with the
    same key, else computed by the context's `UnitRunner` (all missing units at once)."""
    assert stage.fan_out is not None and context.units is not None
    units = stage.fan_out.units(context)
    keys = [unit_key(stage, unit, context) for unit in units]
    found = [context.store.cached(stage.fan_out.name, key) for key in keys]
    missing = [(index, unit, key) for index, (unit, key, m)
               in enumerate(zip(units, keys, found, strict=True)) if m is None]
    if len(missing) < len(units):
        context.logger.info("stage %s: %d of %d units cached", stage.fan_out.name,
                            len(units) - len(missing), len(units))
    computed = iter(context.units(stage, context, missing) if missing else [])
    return [UnitOutcome(i, m) if m is not None else next(computed)
            for i, m in enumerate(found)]


def units_here(stage: Stage[Any], context: StageContext[Any],
               missing: list[Missing]) -> list[UnitOutcome]:
    """The plain `UnitRunner`: each missing unit computed in this process, in turn."""
    assert stage.fan_out is not None
    return [stage.fan_out.compute(context, unit, key) for _, unit, key in missing]


@contextlib.contextmanager
def _collecting_only_new() -> Iterator[None]:
    """Cyclic garbage collection that walks only what was allocated inside the block.

    A stage allocates hundreds of thousands of containers (per-case rows, report dicts),
    and every full collection they trigger would walk the whole heap left by imports and
    earlier stages too (about a tenth of a 10k run's CPU). Frozen objects are still freed
    by reference counting; unfreezing at the end hands them back to the collector, so a
    long-lived worker running many stages keeps nothing it would otherwise free.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_stage(stage: Stage[S], context: StageContext[S]) -> Manifest:
    """The stage's manifest: a published one with the same key, else computed now. A
    fanned-out stage first has its units (unless a runner already handed them over in
    `context.unit_outcomes`), which its key and its merge read."""
    with _collecting_only_new():
        # frozen first: the start-up's objects are all young (`decflow.startup`), and
        # with the thresholds back the next allocation would walk them all (25 ms)
        startup.end()
        return _run_stage(stage, context)


def _run_stage(stage: Stage[S], context: StageContext[S]) -> Manifest:
    if stage.fan_out is not None and not context.unit_outcomes:
        context.unit_outcomes[:] = run_units(stage, context)
    key = stage.key(context)
    manifest = context.store.cached(stage.name, key) if stage.cached else None
    if manifest is not None and stage.reusable(context, manifest):
        context.logger.info("stage %s: cache hit (%s)", stage.name, key[:12])
    else:
        manifest = stage.compute(context, key)
    stage.validate(context, manifest)
    return manifest


# The stages and contexts of a contract run.
RunStage = Stage[RunSpec]
RunContext = StageContext[RunSpec]


class Deferred(Generic[S]):
    """A stage's `compute` named by reference (`package.module:function`) and imported on
    first use: a pipeline lists its later stages without importing their code, so a run
    starts calling its backend before the code of the stages after the calls is loaded
    (`load` imports it meanwhile, see `decflow.commands.ahead`)."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self._compute: Callable[[StageContext[S], str], Manifest] | None = None

    def load(self) -> Callable[[StageContext[S], str], Manifest]:
        if self._compute is None:
            module, _, name = self.ref.partition(":")
            self._compute = getattr(importlib.import_module(module), name)
        return self._compute

    def __call__(self, context: StageContext[S], key: str) -> Manifest:
        return self.load()(context, key)
