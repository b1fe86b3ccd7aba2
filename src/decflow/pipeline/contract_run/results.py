"""The steps of the `results` stage, which `call_stage` drives (in-process or as Prefect
tasks): `prepare_calls` (health check), `call_shard`, `check_originals`, `finish_results`.
Shards are fixed slices of the requests table, so a shard can be retried
or resumed on its own: each one sends only requests without a recorded result, and writes
its results as chunk files named after the shard.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow import interrupts
from decflow.backends.base import Backend, DecisionSpec
from decflow.backends.engine import _rows_from_tuples
from decflow.backends.registry import backend_class, build_backend, decision_spec
from decflow.backends.results_schema import RESULTS_SCHEMA
from decflow.errors import DecflowError
from decflow.pipeline.contract_run import call_cache
from decflow.pipeline.contract_run.backend_plan import run_backend
from decflow.pipeline.contract_run.calls import (
    decide_batches,
    decide_requests,
    generation_error_rows,
    original_error_rows,
)
from decflow.pipeline.contract_run.journal import SUFFIX as JOURNAL
from decflow.pipeline.contract_run.journal import Journal, journal_rows
from decflow.pipeline.schemas import REQUESTS_SCHEMA
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.pipeline.stage import Progress
from decflow.store.store import Manifest, Part, Store, open_store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

PHASES = ("originals", "transformed")
CHUNK = "chunk-"  # results are written as chunk-<phase initial><shard>-… files
VERSION = "1"


def phase_rows(requests: pl.DataFrame, phase: str) -> pl.DataFrame:
    is_original = pl.col("property") == ""
    return requests.filter(is_original if phase == "originals" else ~is_original)


def chunk_name(phase: str, shard: int) -> str:
    """The name a shard's result chunks start with: the phase's initial tells
    `phase_result_parts` which phase the chunk holds."""
    return f"{CHUNK}{phase[0]}{shard:06d}"


def transformed(part: Part) -> bool:
    """Whether a results part is a chunk of the `transformed` phase (`chunk_name`)."""
    return part.path.rsplit("/", 1)[-1].startswith(f"{CHUNK}{PHASES[1][0]}")


def phase_result_parts(results: Manifest, phase: str) -> Manifest:
    """The results artifact narrowed to the chunks of `phase` (see `ShardSink` for the
    names). Parts not written as chunks (an inline re-gate) count as `originals`."""
    kept = tuple(p for p in results.parts if transformed(p) == (phase == PHASES[1]))
    return dataclasses.replace(results, parts=kept)


# What calling needs of a request (the stored steps stay on disk).
CALL_COLUMNS = ["request_id", "case_id", "property", "input_text", "input_json",
                "shown_labels", "label_order", "pre_error_kind", "pre_error_message"]


class RequestParts:
    """Shards of a phase read from the requests parts they fall in, one part in memory at a
    time, so the call stage never holds the whole requests table. `handed`: the first
    part's (sha256, table) as the requests stage wrote it in this process, used instead of
    reading that part back once."""

    def __init__(self, store: Store, requests: Manifest,
                 handed: tuple[str, pl.DataFrame] | None = None) -> None:
        self.store = store
        self.parts = requests.parts
        self._handed = (handed[1] if handed is not None and self.parts
                        and self.parts[0].sha256 == handed[0] else None)
        self.originals: list[int] = []
        for index, part in enumerate(self.parts):
            table = self._handed if index == 0 and self._handed is not None else (
                store.read_part(part, ["property"]))
            self.originals.append(int((table["property"] == "").sum()))
        self._loaded: tuple[int, str, pl.DataFrame] | None = None

    def _counts(self, phase: str) -> list[int]:
        if phase == "originals":
            return self.originals
        return [part.rows - n for part, n in zip(self.parts, self.originals, strict=True)]

    def phase_count(self, phase: str) -> int:
        return sum(self._counts(phase))

    def _phase_part(self, index: int, phase: str) -> pl.DataFrame:
        """The phase's rows of part `index` (the last one asked for stays loaded)."""
        if self._loaded is None or self._loaded[:2] != (index, phase):
            if index == 0 and self._handed is not None:
                # used once: a later phase reads the part, so it is not held all stage long
                table, self._handed = self._handed.select(CALL_COLUMNS), None
            else:
                table = self.store.read_part(self.parts[index], CALL_COLUMNS)
            self._loaded = (index, phase, phase_rows(table, phase))
        return self._loaded[2]

    def rows(self, phase: str, start: int, stop: int) -> pl.DataFrame:
        """Rows [start, stop) of the phase, in stored order."""
        frames = []
        offset = 0
        for index, count in enumerate(self._counts(phase)):
            if offset < stop and offset + count > start:
                rows = self._phase_part(index, phase)
                low = max(start - offset, 0)
                frames.append(rows.slice(low, min(stop, offset + count) - offset - low))
            offset += count
        if not frames:
            return pl.DataFrame(schema={n: REQUESTS_SCHEMA[n] for n in CALL_COLUMNS})
        return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]

    def originals_ids(self) -> pl.DataFrame:
        """request_id, case_id of every original request."""
        frames = [
            phase_rows(self.store.read_part(part, ["request_id", "case_id", "property"]),
                       "originals").select("request_id", "case_id")
            for part, n in zip(self.parts, self.originals, strict=True) if n
        ]
        if not frames:
            return pl.DataFrame(schema={"request_id": pl.String, "case_id": pl.String})
        return pl.concat(frames)


def backend_info(spec: RunSpec, backend: Backend) -> dict[str, Any]:
    return {
        "name": spec.backend,
        "provider": backend.provider,
        "model": backend.model,
        "details": backend.details(),
    }


def prepare_calls(spec: RunSpec) -> dict[str, str] | None:
    """Build the backend and run its health check (unhealthy → exit 2); with the call
    cache on, ask it which model answers and store that with the run."""
    if not spec.healthcheck and spec.call_cache == "off":
        return None  # nothing to ask: no backend built, no event loop
    contract = load_contract_cached(spec.contract_path).contract
    backend = build_backend(contract, spec.backend)

    async def check() -> dict[str, str] | None:
        try:
            if spec.call_cache != "off":
                await call_cache.record_identity(backend, open_store(spec.store_url),
                                                 spec.run_id)
            if not spec.healthcheck:
                return None
            health = await backend.healthcheck()
            if health.status == "unhealthy":
                raise DecflowError(f"backend '{spec.backend}' is unhealthy: {health.detail}")
            return {"status": health.status, "detail": health.detail}
        finally:
            await backend.aclose()

    return interrupts.run(check())


def left_to_send(requests: int, recorded: int) -> int:
    """How many of `requests` still need a result when `recorded` already have one (a
    resumed run's chunks; a shard retried after writing can record a request twice)."""
    return max(requests - recorded, 0)


def recorded_count(store: Store, key: str) -> int:
    """How many results the chunks of the call folder `key` hold so far."""
    return sum(part.rows for part in store.chunk_parts("results", key))


# Result rows a session keeps as it writes them, for the summary in the same process
# (`WRITTEN_RESULTS`); a run with more keeps none: its chunks bound the rows in memory.
HELD_ROWS = 100_000
# In the run's context, from the results stage to the summary in the same process: the
# result chunks written, by path (`Store.read`'s `held`).
WRITTEN_RESULTS = "written results"
# Who else is handed each chunk of the originals a session keeps, once it is stored (a
# thread preparing the summary's work during the calls: `decflow.commands.ahead`).
chunk_readers: list[Callable[[Part, pl.DataFrame], None]] = []


class CallSession:
    """What one process keeps across the shards of a run: the requests' shard index and the
    results recorded before the session began (a resumed run's chunks), plus the errors
    recorded since. Shards are disjoint, so a shard only needs to skip results recorded
    before the session or by itself (`ShardSink.written`)."""

    def __init__(self, parts: RequestParts, recorded: pl.DataFrame) -> None:
        self.parts = parts
        self.recorded = recorded  # request_id, error_kind, error_message
        self.new_errors: list[pl.DataFrame] = []
        # the chunks written in this session, by store path: `finish_results` does not
        # read them back; nor does the summary their rows (`held`, None: too many to keep)
        self.chunks: dict[str, tuple[Part, pl.Series]] = {}
        self.held: dict[str, tuple[str, pl.DataFrame]] | None = {}
        self.held_rows = 0
        self._originals: pl.DataFrame | None = None
        self._failed: pl.DataFrame | None = None

    @classmethod
    def load(cls, store: Store, requests: Manifest, key: str) -> CallSession:
        return cls.load_with(store, RequestParts(store, requests), key)

    @classmethod
    def load_with(cls, store: Store, parts: RequestParts, key: str) -> CallSession:
        return cls(parts, _original_errors(store, key))

    def wrote(self, part: Part, frame: pl.DataFrame) -> None:
        """Keep what a chunk just written holds (its rows only up to `HELD_ROWS`)."""
        self.chunks[part.path] = (part, frame["request_id"])
        self.held_rows += frame.height
        if self.held is not None:
            self.held[part.path] = (part.sha256, frame)
            if self.held_rows > HELD_ROWS:
                self.held = None
            elif not transformed(part):
                for read in chunk_readers:
                    read(part, frame)

    def add(self, frame: pl.DataFrame) -> None:
        if frame["error_kind"].null_count() == frame.height:
            return
        errored = frame.filter(pl.col("error_kind").is_not_null())
        self.new_errors.append(errored.select("request_id", "error_kind", "error_message"))
        self._failed = None

    def any_errors(self) -> bool:
        """Whether any result recorded so far (before or in this session) is an error."""
        return bool(self.new_errors) or self.recorded["error_kind"].null_count() < (
            self.recorded.height)

    def errors(self) -> pl.DataFrame:
        """Every recorded result that is an error."""
        recorded = self.recorded.filter(pl.col("error_kind").is_not_null())
        return pl.concat([recorded, *self.new_errors])

    def failed_originals(self) -> pl.DataFrame:
        """case_id, error_kind of the cases whose original request errored (kept until a
        new error is recorded)."""
        if self._failed is None:
            if self._originals is None:
                self._originals = self.parts.originals_ids()
            self._failed = self._originals.join(self.errors(), on="request_id").select(
                "case_id", "error_kind"
            )
        return self._failed


class ShardSink:
    """Writes one shard's result chunks; names are unique per shard and attempt. Each
    result is journalled as it arrives (`decflow.pipeline.contract_run.journal`)."""

    def __init__(
        self, store: Store, key: str, phase: str, index: int, session: CallSession
    ) -> None:
        self.store = store
        self.folder = store.stage_prefix("results", key)
        self.name = chunk_name(phase, index)
        self.prefix = f"{self.folder}/{self.name}"
        self.attempt = uuid.uuid4().hex[:8]
        self.session = session
        self.count = 0
        self.rows = 0
        self.written: list[pl.DataFrame] = []  # request ids this shard recorded
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
                    done = pl.concat([self.session.recorded.select("request_id"),
                                      *self.written])
                    self(frame.join(done, on="request_id", how="anti", maintain_order="left"))
                os.remove(path)

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.height:
            self.write(frame)()

    def write(self, frame: pl.DataFrame) -> Callable[[], None]:
        """Store `frame` as the shard's next chunk; returns what records it (in the
        session). The call stage's writer thread writes (`engine.ChunkWrites`: one chunk at
        a time, in order) and the thread that runs the shard records, in the same order."""
        part = self.store.write_part(
            f"{self.prefix}-{self.attempt}-{self.count:05d}.parquet", frame)
        self.count += 1

        def record() -> None:
            self.session.wrote(part, frame)
            self.session.add(frame)
            self.written.append(frame.select("request_id"))
            self.rows += frame.height

        return record


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
    progress: Progress | None = None,
    *,
    session: CallSession | None = None,
) -> int:
    """Decide shard `index` of `phase`; returns how many results it recorded now.

    A `session` lets one process (the in-process runner) keep the requests' shard index and
    the recorded results across shards instead of re-reading them from the store.
    """
    session = session or CallSession.load(store, requests, key)
    start = index * spec.shard_size
    shard = session.parts.rows(phase, start, start + spec.shard_size)
    return call_rows(spec, store, key, shard, phase, index, progress, session=session)


def call_rows(
    spec: RunSpec,
    store: Store,
    key: str,
    shard: pl.DataFrame,
    phase: str,
    index: int,
    progress: Progress | None = None,
    *,
    session: CallSession,
) -> int:
    """Decide the requests `shard` (rows of the requests table, all of one `phase`) as
    shard `index`; returns how many results it recorded now (see `call_shard`)."""
    contract = load_contract_cached(spec.contract_path).contract
    decision = decision_spec(contract)
    sink, pending = _unrecorded(store, key, shard, phase, index, session, decision)
    if pending is None:
        return sink.rows
    backend = run_backend(contract, spec.backend, store, spec.run_id)
    calls = _ShardCalls.make(spec, store, backend, sink, pending, decision, progress)

    async def run() -> None:
        try:
            await calls.send(spec, contract, backend)
        finally:
            await backend.aclose()

    if backend.supports_batch and type(backend).aclose is Backend.aclose:
        # answered in this process by a backend that holds nothing to close
        decide_batches(backend, calls.pending, labels=decision.labels,
                       tolerance=contract.evaluation.probability_tolerance,
                       shard_size=spec.shard_size, sink=calls.sink, progress=calls.progress)
    else:
        interrupts.run(run())
    return calls.finish()


def overlaps_shards(spec: RunSpec) -> bool:
    """Whether this process calls the shards of a phase side by side (`call_phase`): for
    a backend of decflow's own answering request by request (one deciding a whole shard at
    once has no calls in flight to overlap; a plugin's shards are called one by one, as
    its worker sets up a backend per shard)."""
    make = backend_class(load_contract_cached(spec.contract_path).contract, spec.backend)
    return make is not None and not make.supports_batch


def call_phase(
    spec: RunSpec,
    store: Store,
    key: str,
    phase: str,
    shards: int,
    session: CallSession,
    progress: Callable[[int], Progress | None],
    answered: dict[str, Future[tuple[Any, ...] | None]] | None = None,
) -> int:
    """Decide every shard of `phase` in this process, one event loop and one backend for
    them all; returns how many results they recorded now. A shard's requests start as the
    one before it has sent its last ones, taking the concurrency slots its workers leave,
    so the calls never drain to nothing between two shards; each shard still records and
    journals its own results (`ShardSink`). `progress(index)`: shard `index`'s progress;
    `answered`: the run's first wave's answers (`first_wave.FirstWave.take`), which the
    first shard records as its own."""
    contract = load_contract_cached(spec.contract_path).contract
    decision = decision_spec(contract)
    backend = run_backend(contract, spec.backend, store, spec.run_id)
    recorded = 0

    async def run() -> None:
        nonlocal recorded
        slots = asyncio.Semaphore(spec.max_concurrency or contract.evaluation.max_concurrency)
        running: list[tuple[_ShardCalls, asyncio.Future[None]]] = []
        try:
            for index in range(shards):
                interrupts.check()
                start = index * spec.shard_size
                rows = session.parts.rows(phase, start, start + spec.shard_size)
                sink, pending = _unrecorded(store, key, rows, phase, index, session, decision)
                if pending is None:
                    recorded += sink.rows
                    continue
                calls = _ShardCalls.make(spec, store, backend, sink, pending, decision,
                                         progress(index))
                sent = asyncio.Event()
                task = asyncio.ensure_future(calls.send(
                    spec, contract, backend, slots=slots, on_sent=sent.set,
                    answered=answered if index == 0 else None))
                running.append((calls, task))
                waiting = asyncio.ensure_future(sent.wait())
                await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                while running and running[0][1].done():  # all answered: finished now
                    shard_calls, sending = running.pop(0)
                    sending.result()  # its error, before another shard starts
                    recorded += shard_calls.finish()
            while running:
                await running[0][1]
                shard_calls, _sending = running.pop(0)
                recorded += shard_calls.finish()
        finally:
            for _calls, sending in running:
                sending.cancel()
            await asyncio.gather(*(sending for _calls, sending in running),
                                 return_exceptions=True)
            await backend.aclose()

    interrupts.run(run())
    return recorded


def _unrecorded(
    store: Store, key: str, shard: pl.DataFrame, phase: str, index: int,
    session: CallSession, decision: DecisionSpec,
) -> tuple[ShardSink, pl.DataFrame | None]:
    """Shard `index`'s sink (its earlier attempts' journals recovered) and its requests
    still to send (None: every one has a result); the transformed requests that cannot be
    sent are recorded as errors here."""
    sink = ShardSink(store, key, phase, index, session)
    sink.recover(decision.labels)
    # The guards below skip polars work that has nothing to do (a fresh shard without
    # errors): per-shard overhead adds up over hundreds of shards.
    done = pl.concat([session.recorded.select("request_id"), *sink.written])
    pending = (
        shard.join(done, on="request_id", how="anti", maintain_order="left")
        if done.height else shard
    )
    if not pending.height:
        return sink, None
    if phase == "transformed":
        if pending["pre_error_kind"].null_count() < pending.height:
            sink(generation_error_rows(pending))
            pending = pending.filter(pl.col("pre_error_kind").is_null())
        failed = session.failed_originals()
        if failed.height:
            blocked = original_error_rows(pending, failed)
            sink(blocked)
            pending = pending.join(
                blocked.select("request_id"), on="request_id", how="anti", maintain_order="left"
            )
    return sink, pending


@dataclasses.dataclass
class _ShardCalls:
    """One shard's requests to send and where their results go, once the call cache
    served what it holds of them (`finish_results` stores the answers it got)."""

    sink: ShardSink
    pending: pl.DataFrame
    progress: Progress | None

    @classmethod
    def make(cls, spec: RunSpec, store: Store, backend: Backend, sink: ShardSink,
             pending: pl.DataFrame, decision: DecisionSpec,
             progress: Progress | None) -> _ShardCalls:
        calls = cls(sink, pending, progress)
        cache = call_cache.CallCache.for_run(spec, store)
        if cache is not None and call_cache.reads(cache.mode):
            served = cache.served(pending, cache.keys(backend, pending, decision),
                                  decision.labels)
            if served.height:
                sink(served)
                calls.pending = pending.join(served.select("request_id"), on="request_id",
                                             how="anti", maintain_order="left")
                calls.progress = _after(progress, served.height)
        return calls

    async def send(self, spec: RunSpec, contract: Contract, backend: Backend,
                   slots: asyncio.Semaphore | None = None,
                   on_sent: Callable[[], None] | None = None,
                   answered: dict[str, Future[tuple[Any, ...] | None]] | None = None) -> None:
        journal = self.sink.journal
        await decide_requests(
            backend, self.pending, decision=decision_spec(contract),
            tolerance=contract.evaluation.probability_tolerance,
            max_concurrency=spec.max_concurrency or contract.evaluation.max_concurrency,
            shard_size=spec.shard_size, sink=self.sink, progress=self.progress,
            journal=journal.record if journal.kept else None, slots=slots, on_sent=on_sent,
            write_chunk=self.sink.write, answered=answered,
        )

    def finish(self) -> int:
        """Close the journal; how many results were recorded."""
        self.sink.journal.close()
        return self.sink.rows


def _after(progress: Progress | None, served: int) -> Progress | None:
    """A shard's progress counting the answers the cache served before any call."""
    if progress is None:
        return None
    inner = progress
    inner(served, None)
    return lambda done, total: inner(served + done, None if total is None else served + total)


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
    spec: RunSpec, store: Store, requests: Manifest, key: str, health: dict[str, str] | None,
    *, extra: dict[str, Any] | None = None, session: CallSession | None = None,
) -> Manifest:
    """Publish the chunks as the results artifact once every request has exactly one row
    (`extra` joins the manifest's own: a sequential run's record; `session`: the one that
    wrote chunks in this process, which are not read back)."""
    chunks = store.chunk_ids("results", key, session.chunks if session else None)
    parts = [part for part, _ids in chunks]
    part_ids = [ids for _part, ids in chunks]
    kept = parts
    if part_ids and pl.concat(part_ids).is_duplicated().any():
        kept = _without_retried(parts, part_ids)
    kept_paths = {part.path for part in kept}
    recorded = pl.concat([ids for part, ids in zip(parts, part_ids, strict=True)
                          if part.path in kept_paths] or [pl.Series("request_id", [], pl.String)])
    ids = store.read(requests, ["request_id"])
    missing = ids.join(recorded.to_frame(), on="request_id", how="anti",
                       maintain_order="left")["request_id"]
    if missing.len():
        raise DecflowError(
            f"run {spec.run_id}: {missing.len()} requests have no result yet "
            f"(first: {missing[0]}); finish it with --resume {spec.run_id}"
        )
    contract = load_contract_cached(spec.contract_path).contract
    backend = run_backend(contract, spec.backend, store, spec.run_id)
    # Stored from what is recorded, not as shards finish: the answers of an interrupted
    # attempt (its chunks, its journals recovered by the resume) were paid for too.
    call_cache.store_recorded(spec, store, backend, decision_spec(contract), requests, kept)
    extra = {"backend": backend_info(spec, backend), "health": health, **(extra or {})}
    cached = call_cache.cache_record(store, spec, kept)
    if cached is not None:
        extra["call_cache"] = cached
    schema = {name: str(dtype) for name, dtype in RESULTS_SCHEMA.items()}
    return store.publish("results", key, [], parts=kept, extra=extra, schema=schema)


def _without_retried(parts: list[Part], part_ids: list[pl.Series]) -> list[Part]:
    """Drop chunks of a shard retried after writing: an earlier chunk holds their rows."""
    seen: set[str] = set()
    kept = []
    for part, ids in zip(parts, part_ids, strict=True):
        listed = ids.to_list()
        if any(i in seen for i in listed):
            continue
        seen.update(listed)
        kept.append(part)
    return kept


@dataclasses.dataclass(frozen=True)
class ShardErrors:
    """What shard `index` of a phase recorded: `results`, of which `errors` are errors;
    `first` the first error (`kind: message`)."""

    results: int
    errors: int
    first: str | None

    @property
    def all_failed(self) -> bool:
        return self.results > 0 and self.errors == self.results


def shard_errors(store: Store, key: str, phase: str, index: int) -> ShardErrors:
    """The errors among the results one shard recorded (its chunk files)."""
    folder = store.stage_prefix("results", key)
    name = f"{CHUNK}{phase[0]}{index:06d}-"
    # unpublished chunks have no manifest to check them against yet
    frames = [pl.read_parquet(io.BytesIO(store.read_bytes(f"{folder}/{file}")),
                              columns=["error_kind", "error_message"])
              for file in store.list_dir(folder)
              if file.startswith(name) and file.endswith(".parquet")]
    if not frames:
        return ShardErrors(0, 0, None)
    found = pl.concat(frames)
    errored = found.filter(pl.col("error_kind").is_not_null())
    first = (None if not errored.height
             else "{error_kind}: {error_message}".format(**errored.row(0, named=True)))
    return ShardErrors(found.height, errored.height, first)
