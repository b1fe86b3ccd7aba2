"""A `Pipeline`: one kind of run as data — its stages, their order, its spec, what its run
record says of it and the typed report its verdict stage yields.

The built-in kinds: the contract run (`contract_run/runner.py: CONTRACT_RUN`), its noise
run (`noise.py: NOISE`), the production check (`production/summary.py: CHECK`) and a
baseline's statistics (`production/stages.py: BASELINE`). One driver runs any of them in
this process (`driver.RunBook`), one generic Prefect loop as a flow
(`flows/stage_loop.py`); neither knows a stage or a kind by name.

The stage order is derived from each stage's `upstream` (a stage runs after every stage it
reads; stages that do not depend on each other keep the order they are listed in), and
checked when the pipeline is built: unique names, at most one verdict stage, no cycle.
Prefect tasks find a pipeline by its `ref` (`module:NAME`), so a pipeline defined outside
decflow (a test's) runs in a flow like the built-ins.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from decflow.errors import DecflowError
from decflow.pipeline.stage import S, Stage, StageContext, UnitRunner, units_here
from decflow.store.store import Manifest, Store


def _nothing_to_prepare(_store: Store, _spec: Any) -> None:
    return None


def _its_own_resume(spec: Any) -> str:
    return str(spec.resume_command())


def _always_kept(_store: Store, _manifests: Mapping[str, Manifest],
                 _computing: Mapping[str, str] | None) -> bool:
    return True


def ordered(stages: tuple[Stage[S], ...]) -> tuple[Stage[S], ...]:
    """The stages in an order where each comes after the stages it reads (`upstream`, among
    these stages), otherwise as listed; a cycle or a repeated name is an error."""
    names = [stage.name for stage in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"a pipeline names a stage twice: {names}")
    left, done = list(stages), []
    placed: set[str] = set()
    while left:
        ready = next((s for s in left
                      if all(u in placed or u not in names for u in s.upstream)), None)
        if ready is None:
            raise ValueError(f"the stages {[s.name for s in left]} read each other in a cycle")
        done.append(ready)
        placed.add(ready.name)
        left.remove(ready)
    return tuple(done)


@dataclass(frozen=True)
class Pipeline(Generic[S]):
    """One kind of run. `name` says what it is (`contract_run`, `check`); `ref` is where it
    is defined (`module:NAME`, so a task in another process finds it); `spec_from`
    rebuilds its spec from its JSON (`spec.to_dict()`); `stages` are ordered from
    `upstream` when it is built; `report` is where the typed report its verdict stage yields
    is defined (`module:Model`, imported by whoever reads one, not to define the pipeline;
    None: it yields none, e.g. a baseline's statistics); `describe(spec, manifests)` the
    fields its run record carries besides the driver's (kind, dataset hash, backend, mode:
    what `decflow runs` lists); `prepare(store, spec)` what a run does before its first
    stage (a contract run continuing another keeps its backend plan); `local_units` how a
    fanned-out stage computes its units in this process (one after the other, unless the
    pipeline knows better: a check reads them on all cores); `aliases` other names
    `--from-stage` takes; `resume(spec)` the command that finishes a stopped run (its
    spec's own, unless a run of this kind is finished by another command); `kept(store,
    manifests, computing)` whether a new run an error stopped is worth keeping (else the
    driver removes it and the error says to run the command again)."""

    name: str
    ref: str
    spec_from: Callable[[dict[str, Any]], S]
    stages: tuple[Stage[S], ...]
    report: str | None
    describe: Callable[[S, Mapping[str, Manifest]], dict[str, Any]]
    prepare: Callable[[Store, S], None] = _nothing_to_prepare
    local_units: UnitRunner = units_here
    aliases: Mapping[str, str] = field(default_factory=dict)
    resume: Callable[[S], str] = _its_own_resume
    kept: Callable[[Store, Mapping[str, Manifest], Mapping[str, str] | None], bool] = \
        _always_kept

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", ordered(self.stages))
        if sum(stage.verdict for stage in self.stages) > 1:
            raise ValueError(f"pipeline {self.name}: more than one verdict stage")

    def stages_for(self, spec: S) -> tuple[Stage[S], ...]:
        """The stages a run of `spec` computes, in order."""
        return tuple(stage for stage in self.stages if stage.applies(spec))

    def stage(self, name: str) -> Stage[S]:
        """The stage called `name` (or an alias of it); an unknown name is an error naming
        the stages."""
        name = self.aliases.get(name, name)
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise DecflowError(f"--from-stage: unknown stage '{name}' "
                           f"(stages: {', '.join(s.name for s in self.stages)})")

    @property
    def verdict_stage(self) -> Stage[S] | None:
        return next((stage for stage in self.stages if stage.verdict), None)

    def restart_from(self, stored: Mapping[str, Manifest], run_id: str,
                     from_stage: str) -> dict[str, Manifest]:
        """The stored manifests of the stages before `from_stage` (`--from-stage`); every
        `restart_input` stage among them must be stored."""
        start = self.stage(from_stage)
        before = self.stages[: self.stages.index(start)]
        missing = [s.name for s in before if s.restart_input and s.name not in stored]
        if missing:
            raise DecflowError(
                f"run {run_id} has no stored '{missing[0]}' stage to start from "
                f"'{start.name}'")
        return {s.name: stored[s.name] for s in before if s.name in stored}

    def context(self, spec: S, store: Store, loaded: Any, manifests: dict[str, Manifest],
                **context: Any) -> StageContext[S]:
        """The context its stages run in; a fanned-out stage reads its units here unless
        `units` says otherwise."""
        context.setdefault("units", self.local_units)
        return StageContext(spec, store, loaded, manifests, **context)


def pipeline_at(ref: str) -> Pipeline[Any]:
    """The pipeline defined at `ref` (`module:NAME`), as a task in another process finds
    it."""
    module, _, name = ref.partition(":")
    found = getattr(importlib.import_module(module), name, None)
    if not isinstance(found, Pipeline) or found.ref != ref:
        raise DecflowError(f"{ref}: not a decflow pipeline")
    return found
