"""The `results` stage: the one shard loop both runners drive.

`prepare_calls` (health check) → every shard of the `originals` phase → `check_originals`
(every case errored ⇒ exit 2) → every shard of the `transformed` phase → `finish_results`.
How shards run is the runner's choice: `InProcessShards` runs them here, one after the
other, keeping the requests' shard index and the recorded results across shards; the
Prefect flow submits each shard as a task (`decflow.flows.contract_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from decflow import interrupts
from decflow.pipeline.contract_run import results
from decflow.pipeline.contract_run.first_wave import FIRST_WAVE, FirstWave
from decflow.pipeline.contract_run.inputs import REQUESTS_PART
from decflow.pipeline.contract_run.sequential.record import sent_inputs, sequential_params
from decflow.pipeline.stage import Progress, RunContext, Stage
from decflow.store.store import Manifest


class ShardRunner(Protocol):
    """The steps of the call stage, as a runner executes them."""

    def health(self) -> dict[str, str] | None: ...

    def run(self, phase: str, shards: int) -> None: ...

    def check_originals(self) -> None: ...

    def finish(self, health: dict[str, str] | None) -> Manifest: ...


class InProcessShards:
    """Shards called in this process, in order, with progress per recorded result."""

    def __init__(self, context: RunContext, key: str, parts: results.RequestParts) -> None:
        self.context, self.key = context, key
        self.requests = context.manifests["requests"]
        self.session = results.CallSession.load_with(context.store, parts, key)
        # a resumed run counts what is left to send, not what its first attempt sent
        self.left = results.left_to_send(self.requests.rows, self.session.recorded.height)
        self.update = context.progress("calls", self.left) if context.progress else None
        self.done = 0
        self.counted = 0  # results of the phase's shards side by side (`_progress`)
        self.first = _first_wave(context)

    def health(self) -> dict[str, str] | None:
        return results.prepare_calls(self.context.spec)

    def run(self, phase: str, shards: int) -> None:
        context = self.context
        first, self.first = (self.first, None) if phase == results.PHASES[0] else (None, None)
        if results.overlaps_shards(context.spec):
            answered = first.take() if first is not None else None
            self.done += results.call_phase(context.spec, context.store, self.key, phase,
                                            shards, self.session, self._progress(shards),
                                            answered=answered)
            return
        if first is not None:  # (a first wave is only sent where shards overlap)
            first.close()
        for index in range(shards):
            interrupts.check()
            base = self.done

            def progress(shard_done: int, _total: int | None, base: int = base) -> None:
                if self.update:
                    self.update(base + shard_done, self.left)

            self.done += results.call_shard(
                context.spec, context.store, self.requests, self.key, phase, index, progress,
                session=self.session,
            )

    def _progress(self, shards: int) -> Callable[[int], Progress | None]:
        """Each shard's progress for `call_phase`: the shards' results so far added up
        (shards run side by side)."""
        counts = [0] * shards
        base = self.done

        def of(index: int) -> Progress | None:
            update = self.update
            if update is None:
                return None

            def progress(shard_done: int, _total: int | None) -> None:
                self.counted += shard_done - counts[index]
                counts[index] = shard_done
                update(base + self.counted, self.left)

            return progress

        self.counted = 0
        return of

    def check_originals(self) -> None:
        if not self.session.any_errors():
            return  # every result this run holds is an answer: no need to read them back
        results.check_originals(self.context.spec, self.context.store, self.requests,
                                self.key)

    def finish(self, health: dict[str, str] | None) -> Manifest:
        manifest = results.finish_results(self.context.spec, self.context.store,
                                          self.requests, self.key, health,
                                          session=self.session)
        if self.session.held is not None:
            self.context.outputs[results.WRITTEN_RESULTS] = self.session.held
        return manifest


def _first_wave(context: RunContext) -> FirstWave | None:
    """The run's first wave (`first_wave.py`), if its requests are this stage's: made of
    the very dataset bytes the `cases` stage stored (else it is closed, its answers
    dropped). Only answers to requests the first shard still has to send are recorded."""
    wave: FirstWave | None = context.outputs.pop(FIRST_WAVE, None)
    if wave is None:
        return None
    if wave.digest == context.manifests["cases"].extra.get("hash"):
        return wave
    wave.close()
    return None


def call_stage(context: RunContext, key: str) -> Manifest:
    handed = context.outputs.pop(REQUESTS_PART, None)
    if context.spec.sequential:
        # (imported here: a run of the whole suite never needs the sequential driver)
        from decflow.pipeline.contract_run.sequential.calls import sequential_call_stage

        return sequential_call_stage(context, key)
    parts = results.RequestParts(context.store, context.manifests["requests"], handed)
    factory = context.shards or InProcessShards
    runner: ShardRunner = factory(context, key, parts)
    health = runner.health()
    size = context.spec.shard_size
    for phase in results.PHASES:
        if phase == "transformed":
            runner.check_originals()
        shards = -(-parts.phase_count(phase) // size)
        if shards:  # (a phase without requests sets up no backend or event loop)
            runner.run(phase, shards)
    return runner.finish(health)


def _backend(context: RunContext) -> dict[str, Any]:
    return {"backend": context.spec.backend, **sequential_params(context.spec)}


RESULTS = Stage("results", results.VERSION, ("requests",), call_stage, params=_backend,
                keyed_by_run=True, restart_input=True, sharded=True, adopts=sent_inputs,
                title="call the backend")
