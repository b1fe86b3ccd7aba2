"""The one driver of every pipeline: the `RunBook` a runner keeps while it runs a run's
stages, in this process (`drive`) or as Prefect tasks (`flows/stage_loop.py`).

It takes the run's lock, reuses stored stages (`--from-stage`, or a finished run's that a
new run continues), keeps the manifests so far and stage timings, and keeps
`runs/<id>/run.json` current: `running` from the start, then the verdict stage's status
(`pass`/`warn`/`fail`), `failed` with its error line after an error, `interrupted` after
SIGINT/SIGTERM (a run killed outright stays `running` without a lock holder, which reads as
interrupted). A run without an id (a baseline's statistics, the SDK's check of a contract
object) is driven the same way, with no lock and no record.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

from decflow import interrupts
from decflow.errors import DecflowError, Interrupted
from decflow.pipeline.pipeline import Pipeline
from decflow.pipeline.spec import load_contract_cached
from decflow.pipeline.stage import S, Stage, run_stage
from decflow.store.runs import (
    FAILED,
    INTERRUPTED,
    RECORD,
    REPORT,
    RUNNING,
    discard_unrecorded,
    has_run,
    read_run_json,
    read_run_record,
    run_lock,
    run_path,
    write_run_record,
)
from decflow.store.store import DamagedArtifact, Manifest, Store, StoreUnusable

if TYPE_CHECKING:
    from decflow.contracts.loader import LoadedContract

log = logging.getLogger("decflow")


def stored_manifests(store: Store, run_id: str) -> dict[str, Manifest]:
    record = read_run_record(store, run_id)
    return {name: Manifest.from_dict(m) for name, m in record["stages"].items()}


# What `--resume` of a run of each kind is (a noise run is resumed by the diff that makes it).
RESUMED_BY = {"run": "decflow test/fuzz/stability CONTRACT --resume RUN",
              "check": "decflow check CONTRACT --resume RUN"}


def resumable(store: Store, run_id: str, kind: str, contract_path: str) -> dict[str, Any]:
    """The record of stored run `run_id`, to finish it or continue it with `--resume`: a
    run of `kind` (`run` for contract runs) made with the contract `contract_path` holds
    now (by hash)."""
    record = read_run_record(store, run_id)
    found = record.get("kind", "run")
    if found != kind:
        how = RESUMED_BY.get(found)
        raise DecflowError(f"run {run_id} is a {found} run, not a {kind} run"
                           + (f"; resume it with `{how}`" if how else
                              "; it cannot be resumed on its own"))
    current = load_contract_cached(contract_path).hash
    if record["contract_hash"] != current:
        raise DecflowError(
            f"run {run_id} used contract {record['contract_hash']}, but "
            f"{contract_path} now hashes to {current}; start a new run instead"
        )
    return record


class RunBook(Generic[S]):
    """What a runner keeps while it runs a pipeline's stages: the manifests so far, stage
    timings, and the run record kept current (see the module docstring). Shared by the
    in-process driver and the Prefect stage loop.

    The run's lock is taken first and held until the book is closed (use it as a context
    manager), so no two processes work on one run. Closed by an error, the run is recorded
    `failed` with its error line; by SIGINT/SIGTERM, `interrupted`, and `Interrupted` is
    raised naming the run and the command that finishes it."""

    def __init__(
        self,
        pipeline: Pipeline[S],
        spec: S,
        store: Store,
        *,
        loaded: LoadedContract | None = None,
        from_stage: str | None = None,
        on_stage: Callable[[str, Manifest], None] | None = None,
        inherited: Mapping[str, Manifest] | None = None,
        identity: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> None:
        """`loaded`: the contract, when it is not read from `spec.contract_path`;
        `inherited`: stages taken from another run (a noise run reuses the `cases` of the
        run whose noise it measures); `identity`: fields every record of the run carries
        (the run a noise run measures); `context`: the rest of the stages' context (its
        `logger` the book's too)."""
        self.pipeline, self.spec, self.store = pipeline, spec, store
        self.logger, self.on_stage = context.setdefault("logger", log), on_stage
        self.loaded = loaded or load_contract_cached(spec.contract_path)
        self.recorded = bool(spec.run_id)
        self.lock = run_lock(store, spec.run_id) if self.recorded else None
        if self.lock is not None:
            self.lock.acquire()
        # a new run may not be worth keeping when an error stops it (`Pipeline.kept`)
        self.new = self.recorded and not has_run(store, spec.run_id)
        try:
            # a new run continuing a finished one reuses every stage before its verdict
            # (`--from-stage` narrows that); a resumed run its own before `--from-stage`
            verdict = pipeline.verdict_stage
            start = from_stage or (verdict.name if spec.parent and verdict else None)
            self.manifests: dict[str, Manifest] = dict(inherited or {})
            if start:
                source = spec.parent or spec.run_id
                self.manifests.update(pipeline.restart_from(stored_manifests(store, source),
                                                             source, start))
            self.identity = dict(identity or {})
            self.timings: dict[str, float] = {}
            # one dict per manifest for every record (the record writer reuses its JSON)
            self.stage_dicts: dict[str, tuple[Manifest, dict[str, Any]]] = {}
            self.computing: dict[str, str] | None = None  # the run-keyed stage under way
            # the verdict stage's manifest extra: status, exit code, headline, report path
            self.verdict: dict[str, Any] = {}
            self.context = pipeline.context(spec, store, self.loaded, self.manifests,
                                            **context)
            if self.recorded:
                contract = Path(spec.contract_path)
                store.write_bytes(run_path(spec.run_id, f"contract{contract.suffix}"),
                                  contract.read_bytes())
                pipeline.prepare(store, spec)
                self.record(RUNNING)
        except BaseException:
            if self.recorded:
                with contextlib.suppress(DecflowError, OSError):
                    discard_unrecorded(store, spec.run_id)
            self._release()
            raise

    def __enter__(self) -> RunBook[S]:
        return self

    def __exit__(self, _kind: object, error: BaseException | None, _trace: object) -> None:
        kept = True
        try:
            # a store that failed is not a mistake in the command: the run stays resumable
            if isinstance(error, DecflowError) and self.new and \
                    not isinstance(error, StoreUnusable | DamagedArtifact):
                kept = self._keep_or_discard()
            if error is not None and self.recorded and kept:
                self._record_stop(error)
        finally:
            self._release()
        if not self.recorded:
            return
        if isinstance(error, KeyboardInterrupt | Interrupted):
            signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
            raise Interrupted(int(signum), self.spec.run_id, self.resume) from error
        if isinstance(error, DecflowError):
            error.about_run(self.spec.run_id, self.resume if kept else None, kept=kept)

    def _keep_or_discard(self) -> bool:
        """Whether a new run stopped by an error is kept (`Pipeline.kept`); else its record
        and what it wrote beside it are removed."""
        try:
            if self.pipeline.kept(self.store, self.manifests, self.computing):
                return True
            self.store.discard(run_path(self.spec.run_id, RECORD))
            discard_unrecorded(self.store, self.spec.run_id)
        except (DecflowError, OSError):  # the store failing: the run stays recorded
            return True
        return False

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    @property
    def resume(self) -> str:
        return self.pipeline.resume(self.spec)

    @property
    def stages(self) -> tuple[Stage[S], ...]:
        """The stages this run computes, in order."""
        return self.pipeline.stages_for(self.spec)

    def _record_stop(self, error: BaseException) -> None:
        """Record how the run stopped; the store may be what failed, so a failure to record
        it leaves the record `running`, which reads as interrupted once the lock is gone."""
        if isinstance(error, KeyboardInterrupt | Interrupted):
            status, line = INTERRUPTED, "interrupted"
        elif isinstance(error, DecflowError):
            status, line = FAILED, str(error)
        else:
            status, line = FAILED, f"internal error: {type(error).__name__}: {error}"
        with contextlib.suppress(DecflowError, OSError):
            self.record(status, error=line)

    def record(self, status: str, **extra: Any) -> None:
        """Write the run record with `status` (nothing for a run without an id)."""
        if not self.recorded:
            return
        spec = self.spec
        write_run_record(self.store, {
            "run_id": spec.run_id,
            "spec": spec.to_dict(),
            "decision": self.loaded.contract.decision.name,
            "contract_hash": self.loaded.hash,
            **self.pipeline.describe(spec, self.manifests),
            "status": status,
            "resume": self.resume,  # what `decflow runs` says of it once it stopped
            "parent": spec.parent,
            "computing": self.computing,
            "stages": {name: self._stage_dict(name, m) for name, m in self.manifests.items()},
            "timings_s": self.timings,
            **self.identity,
            **extra,
        })

    def _stage_dict(self, name: str, manifest: Manifest) -> dict[str, Any]:
        found = self.stage_dicts.get(name)
        if found is None or found[0] is not manifest:
            found = self.stage_dicts[name] = (manifest, manifest.to_dict())
        return found[1]

    def run(self, stage: Stage[S], compute: Callable[[], Manifest] | None = None) -> Manifest:
        """Compute `stage` here (or with `compute`, e.g. as a Prefect task) unless the run
        reuses it, and record it; the verdict stage also records the run's verdict."""
        name = stage.name
        interrupts.check()
        if name in self.manifests and stage.cached:
            self.logger.info("stage %s: reused from run %s", name,
                             self.spec.parent or self.spec.run_id)
            return self.manifests[name]
        if stage.keyed_by_run:  # its folder holds this run's calls before it is published:
            # named in the record, so `runs gc` finds it if the run never finishes
            self.computing = {"stage": name, "key": stage.key(self.context)}
            self.record(RUNNING)
        started = time.perf_counter()
        if compute is not None:
            manifest = compute()
        else:  # a fanned-out stage starts with no units of its own
            here = replace(self.context, unit_outcomes=[]) if stage.fan_out else self.context
            manifest = run_stage(stage, here)
        self.computing = None
        self.manifests[name] = manifest
        self.manifests.update(stage.adopts(manifest))
        self.timings[name] = round(time.perf_counter() - started, 4)
        if stage.verdict:
            self.verdict = dict(manifest.extra)
            self.record(self.verdict["status"], exit_code=self.verdict["exit_code"])
        else:
            self.record(RUNNING)
        if self.on_stage:
            self.on_stage(name, manifest)
        return manifest

    def run_all(self) -> None:
        """Every stage of the run, in order, in this process."""
        for stage in self.stages:
            self.run(stage)

    def report(self) -> dict[str, Any]:
        """The run's report (kept in memory when its verdict stage ran in this process)."""
        found = self.context.outputs.get("report")
        if found is None:
            found = read_run_json(self.store, self.spec.run_id, REPORT)  # sha256 checked
        return dict(found)


def drive(pipeline: Pipeline[S], spec: S, store: Store, **book: Any) -> dict[str, Any]:
    """Run (or resume) every stage of `pipeline` for `spec` in this process; returns the
    report its verdict stage wrote. `book`: the `RunBook`'s options."""
    with RunBook(pipeline, spec, store, **book) as running:
        running.run_all()
        return running.report()
