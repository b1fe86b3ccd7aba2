"""The contract-run graph and the `RunBook` both runners keep while they drive it.

`stages_for(mode)` is the graph: cases → requests → results (→ comparisons → minimized when
the mode judges properties) → summary (which stores the report). `run_contract` drives it in
this process; the Prefect flow (`decflow.flows.contract_run`) drives the same stages as tasks. Both
record the run under `runs/<run_id>/` through the same `RunBook`, so either can resume,
re-gate or diff the other's runs.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from decflow import interrupts
from decflow.errors import DecflowError, Interrupted
from decflow.pipeline.contract_run.backend_plan import plan_path, stored_plan
from decflow.pipeline.contract_run.call_stage import RESULTS
from decflow.pipeline.contract_run.comparisons import COMPARISONS, MINIMIZED
from decflow.pipeline.contract_run.inputs import CASES, REQUESTS
from decflow.pipeline.contract_run.resume import answered, forget_calls
from decflow.pipeline.contract_run.sequential_calls import adopt_sent
from decflow.pipeline.contract_run.summary import SUMMARY
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.pipeline.stage import ProgressFactory, RunStage, StageContext, run_stage
from decflow.report.modes import STAGES, Mode
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

log = logging.getLogger("decflow")
# Every contract-run stage by name: the names `Mode.stages` lists.
STAGE_BY_NAME = {
    stage.name: stage for stage in (CASES, REQUESTS, RESULTS, COMPARISONS, MINIMIZED, SUMMARY)
}
# `--from-stage report` recomputes the summary, which writes the report.
STAGE_ALIASES = {"report": SUMMARY.name}


def stages_for(mode: Mode) -> tuple[RunStage, ...]:
    """The stages a run of `mode` computes, in order."""
    return tuple(STAGE_BY_NAME[name] for name in mode.stages)


def stored_manifests(store: Store, run_id: str) -> dict[str, Manifest]:
    record = read_run_record(store, run_id)
    return {name: Manifest.from_dict(m) for name, m in record["stages"].items()}


def stage_named(name: str) -> str:
    """The stage `--from-stage NAME` means (`report` is `summary`); an unknown name is an
    error naming the stages."""
    stage = STAGE_ALIASES.get(name, name)
    if stage not in STAGES:
        raise DecflowError(f"--from-stage: unknown stage '{stage}' (stages: {', '.join(STAGES)})")
    return stage


def reuse_upstream(store: Store, run_id: str, from_stage: str) -> dict[str, Manifest]:
    """The stored manifests of the stages before `from_stage` (`--from-stage`)."""
    from_stage = stage_named(from_stage)
    stored = stored_manifests(store, run_id)
    upstream = STAGES[: STAGES.index(from_stage)]
    missing = [name for name in upstream
               if STAGE_BY_NAME[name].restart_input and name not in stored]
    if missing:
        raise DecflowError(
            f"run {run_id} has no stored '{missing[0]}' stage to start from '{from_stage}'"
        )
    return {name: stored[name] for name in upstream if name in stored}


class RunBook:
    """What a runner keeps while it runs a contract's stages: the manifests so far (upstream
    ones reused with `--from-stage`, or from the finished run a new run continues), stage
    timings, and `runs/<id>/run.json` kept current. Shared by the in-process runner and the
    Prefect flow.

    The run's lock is taken first and held until the book is closed (use it as a context
    manager), so no two processes work on one run. Closed by an error, the run is recorded
    `failed` with its error line; by SIGINT/SIGTERM, `interrupted`, and `Interrupted` is
    raised naming the run and the command that finishes it."""

    def __init__(
        self,
        spec: RunSpec,
        store: Store,
        *,
        from_stage: str | None = None,
        logger: Any = log,
        on_stage: Callable[[str, Manifest], None] | None = None,
        inherited: Mapping[str, Manifest] | None = None,
        identity: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> None:
        """`inherited`: stages taken from another run (a noise run reuses the `cases` of the
        run whose noise it measures); `identity`: fields every record of the run carries
        (a noise run's kind and the run it measures)."""
        self.spec, self.store, self.logger, self.on_stage = spec, store, logger, on_stage
        self.loaded = load_contract_cached(spec.contract_path)
        self.lock = run_lock(store, spec.run_id)
        self.lock.acquire()
        # a new run that fails before any answer is not kept (`resume`); a resumed one is
        self.new = not has_run(store, spec.run_id)
        try:
            # a new run continuing a finished one reuses every stage it may (`--from-stage`
            # narrows that); a resumed run reuses its own stages before `--from-stage`
            start = from_stage or (SUMMARY.name if spec.parent else None)
            self.manifests: dict[str, Manifest] = dict(inherited or {})
            if start:
                self.manifests.update(reuse_upstream(store, spec.parent or spec.run_id, start))
            self.identity = dict(identity or {})
            self.timings: dict[str, float] = {}
            self.computing: dict[str, str] | None = None  # the run-keyed stage under way
            # the verdict stage's manifest extra: status, exit code, report path
            self.verdict: dict[str, Any] = {}
            self.context = StageContext(spec, store, self.loaded, self.manifests,
                                        logger=logger, **context)
            source = Path(spec.contract_path)
            store.write_bytes(run_path(spec.run_id, f"contract{source.suffix}"),
                              source.read_bytes())
            if spec.parent:
                keep_plan(store, spec.parent, spec.run_id)
            self.record(RUNNING)
        except BaseException:
            with contextlib.suppress(DecflowError, OSError):
                discard_unrecorded(store, spec.run_id)
            self.lock.release()
            raise

    def __enter__(self) -> RunBook:
        return self

    def __exit__(self, _kind: object, error: BaseException | None, _trace: object) -> None:
        kept = True
        try:
            # a store that failed is not a mistake in the command: the run stays resumable
            if isinstance(error, DecflowError) and self.new and \
                    not isinstance(error, StoreUnusable | DamagedArtifact):
                kept = self._keep_or_discard()
            if error is not None and kept:
                self._record_stop(error)
        finally:
            self.lock.release()
        if isinstance(error, KeyboardInterrupt | Interrupted):
            signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
            raise Interrupted(int(signum), self.spec.run_id, self.resume) from error
        if isinstance(error, DecflowError):
            error.about_run(self.spec.run_id, self.resume if kept else None, kept=kept)

    def _keep_or_discard(self) -> bool:
        """Whether a new run stopped by an error is kept: only once a backend answered;
        else its calls' folder and the run's folder are removed (see `resume`)."""
        key = self.computing["key"] if self.computing and \
            self.computing["stage"] == RESULTS.name else None
        try:
            if RESULTS.name in self.manifests or answered(self.store, key):
                return True
            forget_calls(self.store, key)
            self.store.discard(run_path(self.spec.run_id, RECORD))
            discard_unrecorded(self.store, self.spec.run_id)
        except (DecflowError, OSError):  # the store failing: the run stays recorded
            return True
        return False

    @property
    def resume(self) -> str | None:
        return self.spec.resume_command()

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
        spec = self.spec
        write_run_record(self.store, {
            "run_id": spec.run_id,
            "spec": spec.to_dict(),
            "decision": self.loaded.contract.decision.name,
            "contract_hash": self.loaded.hash,
            "dataset_hash": self.manifests["cases"].extra["hash"]
            if "cases" in self.manifests else None,
            "backend": spec.backend,
            "mode": spec.mode,
            "status": status,
            "resume": self.resume,  # what `decflow runs` says of it once it stopped
            "parent": spec.parent,
            "computing": self.computing,
            "stages": {name: m.to_dict() for name, m in self.manifests.items()},
            "timings_s": self.timings,
            **self.identity,
            **extra,
        })

    def run(self, stage: RunStage, compute: Callable[[], Manifest] | None = None) -> Manifest:
        """Compute `stage` here (or with `compute`, e.g. as a Prefect task) unless the run
        reuses it, and record it; the summary also records the run's verdict."""
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
        manifest = compute() if compute is not None else run_stage(stage, self.context)
        self.computing = None
        self.manifests[name] = manifest
        if name == RESULTS.name:
            adopt_sent(self.manifests, manifest)
        self.timings[name] = round(time.perf_counter() - started, 4)
        if stage.verdict:
            self.verdict = dict(manifest.extra)
            self.record(self.verdict["status"], exit_code=self.verdict["exit_code"])
        else:
            self.record(RUNNING)
        if self.on_stage:
            self.on_stage(name, manifest)
        return manifest

    def report(self) -> dict[str, Any]:
        """The stored report (kept in memory when the summary ran in this process)."""
        found = self.context.outputs.get("report")
        if found is None:
            found = read_run_json(self.store, self.spec.run_id, REPORT)  # sha256 checked
        return dict(found)


def keep_plan(store: Store, parent: str, run_id: str) -> None:
    """A run continuing `parent` reads answers as its parent did (its backend plan)."""
    plan = stored_plan(store, parent)
    if plan is not None:
        store.write_json(plan_path(run_id), plan)


def run_contract(
    spec: RunSpec,
    store: Store,
    *,
    progress: ProgressFactory | None = None,
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    on_stage: Callable[[str, Manifest], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) every stage of a contract run in this process; returns its report."""
    with RunBook(spec, store, from_stage=from_stage, on_stage=on_stage, progress=progress,
                 fail_on_warn=fail_on_warn) as book:
        for stage in stages_for(spec.run_mode):
            book.run(stage)
        return book.report()
