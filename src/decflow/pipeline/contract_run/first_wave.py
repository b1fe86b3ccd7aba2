"""The first requests of a plain remote `decflow test` run, sent before its tables exist.

Before a run's first request its command used to import polars and build the `cases` and
`requests` stages' tables and Parquet parts (~0.25 s of a 20k-case run), while the backend
waited. A `test` run's first requests are known once its dataset's rows are parsed: one
per case, in the dataset's order, request id = case id, the labels as the contract lists
them. So a new run whose dataset is JSONL (`jsonl_cases.case_columns`, no polars) and
whose backend is one of decflow's own answering request by request starts sending them
here, on an event loop in a thread of its own (`FirstWave`), while the command goes on
with the stages as before; the dataset read and its parsed columns are handed to the
`cases` stage (`outputs`), so the stages build what they built, from the same bytes.

The wave is one round: the first `max_concurrency` requests, no more. Its answers are
only kept in memory: nothing is recorded before the `cases` and `requests` manifests are
stored, so a run stopped or failing before its call stage loses what the wave was paid
for, as a run stopped during its calls loses the answers in flight: at most
`max_concurrency`. The call stage's first shard then takes them
(`FirstWave.take`: the wave starts no new request) and records each one, journal first,
as if it had just been answered (`engine.RemoteCaller.run`'s `answered`: a future per
request sent, those still in flight awaited there as they come), and sends the rest. A
run stopped before that (an error, a signal, the process killed) has recorded none of
them: `--resume` sends them again. Everything else
(a resumed or continued run, another mode, a sequential run, the call cache, a health
check, a backend that plans its presentations, a plugin's, another dataset format, a
dataset the fast path declines) takes the path it always took.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decflow import interrupts
from decflow.backends.engine import RemoteCaller
from decflow.backends.registry import backend_class, build_backend, decision_spec
from decflow.contracts.paths import contract_file
from decflow.data.dataset_file import case_input, read_dataset
from decflow.data.jsonl_cases import CaseColumns, case_columns
from decflow.errors import DecflowError
from decflow.pipeline.spec import RunSpec, load_contract_cached
from decflow.switching import switch_interval

if TYPE_CHECKING:
    from decflow.backends.base import Backend
    from decflow.contracts.contract import Contract

# In a run's context (`StageContext.outputs`): from the `cases` stage's key to its
# computation, the dataset's (path read, bytes, hash); from the wave to the `cases` stage,
# (the dataset's hash, its `CaseColumns`); from the wave to the call stage, the wave.
DATASET_READ = "dataset read"
CASE_COLUMNS = "case columns"
FIRST_WAVE = "first wave"

# While the wave's loop shares the interpreter with the stages being built, a thread
# waiting for it asks after this long (Python's default is 5 ms: every answer would wait).
SWITCH_INTERVAL_S = 0.001


def dataset_location(spec: RunSpec, contract: Contract) -> tuple[str, str]:
    """(path to read, path as shown in reports) for the golden dataset."""
    if spec.dataset is not None:
        return spec.dataset, spec.dataset
    if contract.dataset is None:
        raise DecflowError(
            "no dataset given; set 'dataset' in the contract or pass --dataset"
        )
    shown = os.path.join(os.path.dirname(spec.contract_path), contract.dataset)
    base_dir = Path(spec.contract_path).parent
    read = contract_file(base_dir, contract.dataset, field="dataset", source=spec.contract_path,
                         allowed=spec.allow_paths)
    return str(read), shown


class FirstWave:
    """The first requests of a run (one round of the first shard's originals), sent on an
    event loop in a thread of its own from `start` until `take` or `close`; a future of
    each one's answer (a row as `RemoteCaller` records it; None if cancelled unanswered),
    by request id."""

    def __init__(self, spec: RunSpec, contract: Contract, backend: Backend,
                 read: tuple[str, bytes, str], columns: CaseColumns) -> None:
        self.read, self.columns = read, columns
        self.digest = read[2]
        self.sent: dict[str, Future[tuple[Any, ...] | None]] = {}
        self._caller = RemoteCaller(
            backend, decision_spec(contract), contract.evaluation.probability_tolerance,
            spec.max_concurrency or contract.evaluation.max_concurrency)
        # one round: a run stopped before its call stage loses no more paid answers than
        # the requests in flight a run loses at any point of its calls
        self._requests = _requests(columns, tuple(contract.decision.labels),
                                   min(spec.shard_size, self._caller.max_concurrency))
        self._stop = False
        self._taking = threading.Lock()  # (no request is added to `sent` once taken)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Future[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="decflow-first-wave",
                                        daemon=True)

    def outputs(self) -> dict[str, Any]:
        """What the run's stages take from the wave (`StageContext.outputs`)."""
        return {DATASET_READ: self.read, CASE_COLUMNS: (self.digest, self.columns),
                FIRST_WAVE: self}

    def begin(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # what fails here fails again, with its error, when the call stage sends it
        with (switch_interval(SWITCH_INTERVAL_S),
              contextlib.suppress(Exception, asyncio.CancelledError)):
            asyncio.run(self._send())

    async def _send(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.ensure_future(self._workers())
        try:
            await self._main
        finally:
            await self._caller.backend.aclose()

    async def _workers(self) -> None:
        workers = []
        try:
            for _ in range(self._caller.max_concurrency):
                workers.append(asyncio.ensure_future(self._worker()))
                await asyncio.sleep(0)  # (as `RemoteCaller.run`: the first request sooner)
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()

    async def _worker(self) -> None:
        for row in self._requests:  # one shared iterator: each request goes to one worker
            answer: Future[tuple[Any, ...] | None] = Future()
            answer.set_running_or_notify_cancel()  # (only this thread ends it)
            with self._taking:
                if self._stop or interrupts.stopping():
                    return
                self.sent[row[0]] = answer
            try:
                answer.set_result(await self._caller._one(*row))
            except asyncio.CancelledError:
                answer.set_result(None)  # unanswered: the call stage sends it itself
                raise
            except BaseException as exc:  # a configuration error: the run's error
                answer.set_exception(exc)
                raise

    def take(self) -> dict[str, Future[tuple[Any, ...] | None]]:
        """Start no more requests; the requests sent, by request id (those in flight are
        answered on the wave's loop, which ends once they are)."""
        with self._taking:
            self._stop = True
        return self.sent

    def close(self) -> None:
        """Cancel the requests in flight and end the thread (their answers are dropped)."""
        self._stop = True
        loop, main = self._loop, self._main
        if loop is not None and main is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                loop.call_soon_threadsafe(main.cancel)
        if self._thread.is_alive():
            interrupts.join(self._thread)


def _requests(columns: CaseColumns, labels: tuple[str, ...], count: int
              ) -> Iterator[tuple[Any, ...]]:
    """(request id, input, shown labels, label order) of the first `count` cases' original
    requests, as the call stage sends them (`engine._request_rows`)."""
    texts, objects = columns.input_text, columns.input_json
    order = list(range(len(labels)))
    for index, case_id in enumerate(columns.ids[:count]):
        yield (case_id, case_input(texts[index], None if objects is None else objects[index]),
               list(labels), order)


def start(spec: RunSpec) -> FirstWave | None:
    """The first requests of a new plain `test` run of `spec`, being sent; None where the
    run takes its usual path (see the module's docstring)."""
    if (spec.mode != "test" or spec.parent or spec.sequential is not None
            or spec.call_cache != "off" or spec.healthcheck or not spec.run_id):
        return None
    contract = load_contract_cached(spec.contract_path).contract
    make = backend_class(contract, spec.backend)
    if make is None or make.supports_batch:
        return None
    try:
        read_path, shown = dataset_location(spec, contract)
        if Path(read_path).suffix.lower() != ".jsonl":
            return None
        raw, digest = read_dataset(read_path, shown_path=shown)
    except DecflowError:
        return None  # the `cases` stage says what is wrong
    columns = case_columns(raw, contract.decision.labels)
    if columns is None or len(set(columns.ids)) != len(columns.ids):
        return None
    try:
        backend = build_backend(contract, spec.backend)
    except DecflowError:
        return None  # the `requests` stage builds it too, and says what is wrong
    if backend.makes_plans():
        return None
    wave = FirstWave(spec, contract, backend, (read_path, raw, digest), columns)
    wave.begin()
    return wave
