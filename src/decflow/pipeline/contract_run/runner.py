"""The plain in-process runner: the stage graph in order, no Prefect.

The Prefect flow (`decflow.flows`) runs the same stage functions as tasks; both record the
run under `runs/<run_id>/` in the store, so either can resume or re-gate the other's runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from decflow.errors import DecflowError
from decflow.pipeline.contract_run import results as results_stage
from decflow.pipeline.contract_run.inputs import ProgressFactory, stage_cases, stage_requests
from decflow.pipeline.contract_run.summary import artifact_ref, build_report
from decflow.pipeline.spec import STAGES, RunSpec, load_contract_cached, now_iso
from decflow.store.store import Manifest, Store, stage_key

log = logging.getLogger("decflow")
CHECKS_SCHEMA = {
    "gate": pl.String,
    "level": pl.String,
    "metric": pl.String,
    "comparison": pl.String,
    "threshold": pl.Float64,
    "value": pl.Float64,
    "status": pl.String,
    "message": pl.String,
}


def run_dir(run_id: str) -> str:
    return f"runs/{run_id}"


def record_run(store: Store, spec: RunSpec, loaded: Any, manifests: dict[str, Manifest],
               timings: dict[str, float], status: str, **extra: Any) -> dict[str, Any]:
    record = {
        "run_id": spec.run_id,
        "spec": spec.to_dict(),
        "decision": loaded.contract.decision.name,
        "contract_hash": loaded.hash,
        "dataset_hash": manifests["cases"].extra["hash"] if "cases" in manifests else None,
        "backend": spec.backend,
        "mode": spec.mode,
        "status": status,
        "stages": {name: m.to_dict() for name, m in manifests.items()},
        "timings_s": timings,
        "updated_at": now_iso(),
        **extra,
    }
    store.write_json(f"{run_dir(spec.run_id)}/run.json", record)
    return record


def save_contract_copy(store: Store, spec: RunSpec) -> None:
    source = Path(spec.contract_path)
    store.write_bytes(f"{run_dir(spec.run_id)}/contract{source.suffix}", source.read_bytes())


def stored_manifests(store: Store, run_id: str) -> dict[str, Manifest]:
    record = load_run_record(store, run_id)
    return {name: Manifest.from_dict(m) for name, m in record["stages"].items()}


def load_run_record(store: Store, run_id: str) -> dict[str, Any]:
    relative = f"{run_dir(run_id)}/run.json"
    if not store.exists(relative):
        raise DecflowError(f"no run '{run_id}' in the store {store.url} (see `decflow runs`)")
    record: dict[str, Any] = store.read_json(relative)
    return record


def run_contract(
    spec: RunSpec,
    store: Store,
    *,
    progress: ProgressFactory | None = None,
    from_stage: str | None = None,
    fail_on_warn: bool = False,
    on_stage: Callable[[str, Manifest], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) every stage of a contract run and write its report."""
    book = RunBook(spec, store, from_stage, log, on_stage)
    run = book.stage
    manifests = book.manifests
    run("cases", lambda: stage_cases(spec, store))
    run("requests", lambda: stage_requests(spec, store, manifests["cases"]))
    run("results", lambda: run_results(spec, store, manifests["requests"], progress))
    if spec.mode in ("fuzz", "all"):
        from decflow.pipeline.contract_run.comparisons import stage_comparisons, stage_minimized

        run("comparisons", lambda: stage_comparisons(spec, store, manifests))
        run("minimized", lambda: stage_minimized(spec, store, manifests))
    return finish_run(spec, store, manifests, book.timings, fail_on_warn=fail_on_warn)


class RunBook:
    """What a runner keeps while it runs a contract's stages: the manifests so far (upstream
    ones reused with `--from-stage`), stage timings, and `runs/<id>/run.json` kept current.
    Shared by the in-process runner and the Prefect flow."""

    def __init__(
        self,
        spec: RunSpec,
        store: Store,
        from_stage: str | None,
        logger: Any,
        on_stage: Callable[[str, Manifest], None] | None = None,
    ) -> None:
        self.spec, self.store, self.logger, self.on_stage = spec, store, logger, on_stage
        self.loaded = load_contract_cached(spec.contract_path)
        self.manifests: dict[str, Manifest] = (
            reuse_upstream(store, spec.run_id, from_stage) if from_stage else {}
        )
        self.timings: dict[str, float] = {}
        save_contract_copy(store, spec)
        self._record()

    def _record(self) -> None:
        record_run(self.store, self.spec, self.loaded, self.manifests, self.timings, "running")

    def stage(self, name: str, compute: Callable[[], Manifest]) -> None:
        """Compute stage `name` unless it was reused, and record it."""
        if name in self.manifests:
            self.logger.info("stage %s: reused from run %s", name, self.spec.run_id)
            return
        started = time.perf_counter()
        self.manifests[name] = compute()
        self.timings[name] = round(time.perf_counter() - started, 4)
        self._record()
        if self.on_stage:
            self.on_stage(name, self.manifests[name])


def finish_run(spec: RunSpec, store: Store, manifests: dict[str, Manifest],
               timings: dict[str, float], *, fail_on_warn: bool = False) -> dict[str, Any]:
    """The `summary` and `report` stages: build, publish and record the run's report
    (shared by the in-process runner and the Prefect flow)."""
    loaded = load_contract_cached(spec.contract_path)
    manifests, timings = dict(manifests), dict(timings)
    started = time.perf_counter()
    report = build_report(loaded, spec, store, manifests, fail_on_warn=fail_on_warn)
    summary_key = stage_key(
        "summary", "1", loaded.hash, [m.sha256 for m in manifests.values()], {"mode": spec.mode}
    )
    checks = pl.DataFrame(report["checks"], schema=CHECKS_SCHEMA)
    manifests["summary"] = store.publish("summary", summary_key, checks)
    timings["summary"] = round(time.perf_counter() - started, 4)
    report["run"]["artifacts"]["summary"] = artifact_ref(store, manifests["summary"])
    store.write_json(f"{run_dir(spec.run_id)}/report.json", report)
    record_run(store, spec, loaded, manifests, timings, report["status"],
               exit_code=report["exit_code"])
    return report


def run_results(
    spec: RunSpec, store: Store, requests: Manifest, progress: ProgressFactory | None = None
) -> Manifest:
    """The call stage, shard by shard (the Prefect flow runs the same steps as tasks)."""
    key = results_stage.results_key(spec, requests)
    cached = store.manifest("results", key)
    if cached is not None:
        log.info("stage results: cache hit (%s)", key[:12])
        return cached
    health = results_stage.prepare_calls(spec)
    total = requests.rows
    update = progress("calls", total) if progress else None
    done = 0
    session = results_stage.CallSession.load(store, requests, key)
    for phase in results_stage.PHASES:
        if phase == "transformed":
            results_stage.check_originals(spec, store, requests, key)
        shards = -(-session.parts.phase_count(phase) // spec.shard_size)
        for index in range(shards):
            base = done

            def report(shard_done: int, _total: int, base: int = base) -> None:
                if update:
                    update(base + shard_done, total)

            done += results_stage.call_shard(
                spec, store, requests, key, phase, index, report, session=session
            )
    return results_stage.finish_results(spec, store, requests, key, health)


def reuse_upstream(store: Store, run_id: str, from_stage: str) -> dict[str, Manifest]:
    if from_stage not in STAGES:
        raise DecflowError(
            f"--from-stage: unknown stage '{from_stage}' (stages: {', '.join(STAGES)})"
        )
    stored = stored_manifests(store, run_id)
    upstream = STAGES[: STAGES.index(from_stage)]
    required = [name for name in upstream if name in ("cases", "requests", "results")]
    missing = [name for name in required if name not in stored]
    if missing:
        raise DecflowError(
            f"run {run_id} has no stored '{missing[0]}' stage to start from '{from_stage}'"
        )
    return {name: stored[name] for name in upstream if name in stored}
