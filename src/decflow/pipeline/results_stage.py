"""The `results` stage as steps that a runner (in-process or Prefect) can schedule.

`prepare_calls` (health check) → `call_shard` for every shard of the `originals` phase →
`check_originals` → `call_shard` for every shard of the `transformed` phase →
`finish_results`. Shards are fixed slices of the requests table, so a shard can be retried
or resumed on its own: each one sends only requests without a recorded result, and writes
its results as chunk files named after the shard.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from typing import Any

import polars as pl

from decflow.backends.engine import RESULTS_SCHEMA, _rows_from_tuples
from decflow.backends.registry import build_backend, decision_spec
from decflow.errors import DecflowError
from decflow.pipeline.calls import (
    decide_requests,
    generation_error_rows,
    original_error_rows,
)
from decflow.pipeline.journal import SUFFIX as JOURNAL
from decflow.pipeline.journal import Journal, journal_rows
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.store.store import Manifest, Part, Store, stage_key

PHASES = ("originals", "transformed")
VERSION = "1"


def results_key(spec: RunSpec, requests: Manifest) -> str:
    loaded = load_contract_cached(spec.contract_path)
    params = {"run_id": spec.run_id, "backend": spec.backend}
    return stage_key("results", VERSION, loaded.hash, [requests.sha256], params)


def phase_rows(requests: pl.DataFrame, phase: str) -> pl.DataFrame:
    is_original = pl.col("property") == ""
    return requests.filter(is_original if phase == "originals" else ~is_original)


def shard_count(store: Store, spec: RunSpec, requests: Manifest, phase: str) -> int:
    rows = phase_rows(store.read(requests, ["property"]), phase).height
    return -(-rows // spec.shard_size)


def backend_info(spec: RunSpec) -> dict[str, Any]:
    contract = load_contract_cached(spec.contract_path).contract
    backend = build_backend(contract, spec.backend)
    return {
        "name": spec.backend,
        "provider": backend.provider,
        "model": backend.model,
        "details": backend.details(),
    }


def prepare_calls(spec: RunSpec) -> dict[str, str] | None:
    """Build the backend and run its health check (unhealthy → exit 2)."""
    contract = load_contract_cached(spec.contract_path).contract
    backend = build_backend(contract, spec.backend)

    async def check() -> dict[str, str] | None:
        try:
            if not spec.healthcheck:
                return None
            health = await backend.healthcheck()
            if health.status == "unhealthy":
                raise DecflowError(f"backend '{spec.backend}' is unhealthy: {health.detail}")
            return {"status": health.status, "detail": health.detail}
        finally:
            await backend.aclose()

    return asyncio.run(check())


class CallSession:
    """The requests table and what is recorded so far, kept across the shards of one run."""

    def __init__(self, requests: pl.DataFrame, recorded: pl.DataFrame) -> None:
        self.requests = requests
        self.recorded = recorded  # request_id, error_kind, error_message

    @classmethod
    def load(cls, store: Store, requests: Manifest, key: str) -> CallSession:
        return cls(store.read(requests), _original_errors(store, key))

    def add(self, frame: pl.DataFrame) -> None:
        self.recorded = pl.concat(
            [self.recorded, frame.select("request_id", "error_kind", "error_message")]
        )

    def errors(self) -> pl.DataFrame:
        return self.recorded


class ShardSink:
    """Writes one shard's result chunks; names are unique per shard and attempt. Each
    result is journalled as it arrives (`decflow.pipeline.journal`)."""

    def __init__(
        self, store: Store, key: str, phase: str, index: int, session: CallSession
    ) -> None:
        self.store = store
        self.folder = store.stage_prefix("results", key)
        self.name = f"chunk-{phase[0]}{index:06d}"
        self.prefix = f"{self.folder}/{self.name}"
        self.attempt = uuid.uuid4().hex[:8]
        self.session = session
        self.count = 0
        self.rows = 0
        self.journal = Journal(store, f"{self.prefix}-{self.attempt}{JOURNAL}")

    def recover(self, labels: tuple[str, ...]) -> None:
        """Chunk the journalled results of earlier, killed attempts at this shard."""
        for name in self.store.list_dir(self.folder):
            if name.startswith(f"{self.name}-") and name.endswith(JOURNAL):
                path = self.store.path(f"{self.folder}/{name}")
                rows = journal_rows(path)
                if rows:
                    frame = _rows_from_tuples(rows, labels).unique(
                        "request_id", keep="first", maintain_order=True
                    )
                    self(frame.join(self.session.recorded, on="request_id", how="anti",
                                    maintain_order="left"))
                os.remove(path)

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.height:
            self.store.write_part(f"{self.prefix}-{self.attempt}-{self.count:05d}.parquet", frame)
            self.session.add(frame)
            self.count += 1
            self.rows += frame.height


def _original_errors(store: Store, key: str) -> pl.DataFrame:
    parts = store.chunk_parts("results", key)
    frames = [store.read_part(p, ["request_id", "error_kind", "error_message"]) for p in parts]
    if not frames:
        return pl.DataFrame(schema={"request_id": pl.String, "error_kind": pl.String,
                                    "error_message": pl.String})
    return pl.concat(frames)


def call_shard(
    spec: RunSpec,
    store: Store,
    requests: Manifest,
    key: str,
    phase: str,
    index: int,
    progress: Callable[[int, int], None] | None = None,
    *,
    session: CallSession | None = None,
) -> int:
    """Decide shard `index` of `phase`; returns how many results it recorded now.

    A `session` lets one process (the in-process runner) keep the requests table and the
    recorded ids in memory across shards instead of re-reading them from the store.
    """
    contract = load_contract_cached(spec.contract_path).contract
    session = session or CallSession.load(store, requests, key)
    sink = ShardSink(store, key, phase, index, session)
    decision = decision_spec(contract)
    sink.recover(decision.labels)
    shard = phase_rows(session.requests, phase).slice(index * spec.shard_size, spec.shard_size)
    pending = shard.join(session.recorded, on="request_id", how="anti", maintain_order="left")
    if not pending.height:
        return sink.rows
    if phase == "transformed":
        sink(generation_error_rows(pending))
        pending = pending.filter(pl.col("pre_error_kind").is_null())
        originals = phase_rows(session.requests, "originals").select("request_id", "case_id")
        failed = originals.join(session.errors(), on="request_id").filter(
            pl.col("error_kind").is_not_null()
        ).select("case_id", "error_kind")
        blocked = original_error_rows(pending, failed)
        sink(blocked)
        pending = pending.join(
            blocked.select("request_id"), on="request_id", how="anti", maintain_order="left"
        )
    backend = build_backend(contract, spec.backend)

    async def run() -> None:
        try:
            await decide_requests(
                backend, pending, decision=decision,
                tolerance=contract.evaluation.probability_tolerance,
                max_concurrency=spec.max_concurrency or contract.evaluation.max_concurrency,
                shard_size=spec.shard_size, sink=sink, progress=progress,
                journal=sink.journal.record,
            )
        finally:
            await backend.aclose()

    asyncio.run(run())
    sink.journal.close()
    return sink.rows


def check_originals(spec: RunSpec, store: Store, requests: Manifest, key: str) -> None:
    """Every original errored: the check cannot run (exit 2), even if gates would allow it."""
    originals = phase_rows(store.read(requests, ["request_id", "property"]), "originals")
    results = _original_errors(store, key)
    joined = originals.join(results, on="request_id", how="inner")
    failed = joined.filter(pl.col("error_kind").is_not_null())
    if originals.height and failed.height == originals.height:
        first = failed.row(0, named=True)
        raise DecflowError(
            f"backend '{spec.backend}' failed on every case; first error: "
            f"{first['error_kind']}: {first['error_message']}"
        )


def finish_results(
    spec: RunSpec, store: Store, requests: Manifest, key: str, health: dict[str, str] | None
) -> Manifest:
    """Publish the chunks as the results artifact once every request has exactly one row."""
    parts = store.chunk_parts("results", key)
    ids = store.read(requests, ["request_id"])["request_id"]
    seen: dict[str, Part] = {}
    kept: list[Part] = []
    for part in parts:
        part_ids = store.read_part(part, ["request_id"])["request_id"].to_list()
        if any(i in seen for i in part_ids):
            # a shard retried after writing: the earlier chunk already holds these rows
            continue
        for i in part_ids:
            seen[i] = part
        kept.append(part)
    missing = ids.filter(~ids.is_in(list(seen))).to_list()
    if missing:
        raise DecflowError(
            f"run {spec.run_id}: {len(missing)} requests have no result yet "
            f"(first: {missing[0]}); finish it with --resume {spec.run_id}"
        )
    extra = {"backend": backend_info(spec), "health": health}
    schema = {name: str(dtype) for name, dtype in RESULTS_SCHEMA.items()}
    return store.publish("results", key, [], parts=kept, extra=extra, schema=schema)
