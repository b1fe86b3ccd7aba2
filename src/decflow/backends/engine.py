"""The shared call engine: every backend answer goes through here.

It validates answers (validation, never repair), maps shown labels back to contract labels,
reorders to canonical order, picks the argmax (ties to the first label) and turns failures
into typed per-request error rows. In-process backends decide a shard in one vectorized
call; remote backends run under a semaphore of `max_concurrency`, and finished results are
handed out in chunks so an interrupted run loses at most the requests in flight.

numpy and polars are imported where results are built, not with this module: a remote
run's first request does not wait for them (numpy: its command imports it in a thread
during the calls, `commands/ahead.py`; polars: `pipeline/contract_run/first_wave.py`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from decflow.backends.base import (
    Backend,
    BackendError,
    DecisionRequest,
    DecisionSpec,
    InvalidResponse,
    Prediction,
    RequestBatch,
)
from decflow.collector import calls_in_flight
from decflow.data.dataset_file import case_input
from decflow.interrupts import stopping
from decflow.redaction import redact_text
from decflow.textfile import TextProblem, utf8_size
from decflow.untrusted import escape, quote, shorten

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

MAX_ERROR_MESSAGE = 1000
# Result rows per chunk file: what a process killed between two chunks loses where no
# journal keeps each result (object stores); with a journal, chunks only bound the
# rows held in memory, and fewer, larger files cost less to write and to read back.
CHUNK_ROWS = 256
JOURNALLED_CHUNK_ROWS = 2048
# Where a result row (`RemoteCaller._one`'s tuple, a journal line) holds its error kind.
RESULT_ERROR_KIND = 3
MAX_ANSWER_FIELD_BYTES = 64 << 10  # the model, its version, the metadata's JSON text
MAX_LISTED_LABELS = 10

SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "authorization",
        "access_token",
        "refresh_token",
        "token",
        "password",
        "secret",
        "client_secret",
        "cookie",
        "set_cookie",
    }
)


def mask_secret_keys(value: Any) -> Any:
    """Replace values under secret-like keys (case-insensitive, `-` read as `_`), recursively."""
    if isinstance(value, Mapping):
        return {
            key: "[REDACTED]"
            if str(key).lower().replace("-", "_") in SECRET_KEYS
            else mask_secret_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask_secret_keys(item) for item in value]
    return value


def error_kind(exc: BaseException) -> tuple[str, str]:
    """(kind, message) recorded for a per-case failure raised by backend code: a
    `BackendError` keeps its kind, anything else is `exception` (`RuntimeError: boom`).
    Messages may quote what a backend sent: they are escaped and cut (`decflow.untrusted`)."""
    if isinstance(exc, BackendError):
        kind, message = exc.kind, str(exc)
    else:
        kind, message = "exception", f"{type(exc).__name__}: {exc}"
    return kind, shorten(escape(message), MAX_ERROR_MESSAGE)


def _labels(labels: Sequence[object]) -> str:
    shown = ", ".join(quote(str(label), 40) for label in labels[:MAX_LISTED_LABELS])
    more = len(labels) - MAX_LISTED_LABELS
    return f"[{shown}{f', … {more} more' if more > 0 else ''}]"


def check_probabilities(
    answer: Mapping[str, Any], shown: Sequence[str], tolerance: float
) -> list[float]:
    """Validate an answer keyed by shown labels; return values in shown order."""
    if not isinstance(answer, Mapping):
        raise InvalidResponse("probabilities must be an object keyed by label")
    if answer.keys() != set(shown):  # (one set comparison for the common answer)
        missing = [label for label in shown if label not in answer]
        unknown = sorted(str(key) for key in answer if key not in shown)
        parts = []
        if missing:
            parts.append(f"missing labels {_labels(missing)}")
        if unknown:
            parts.append(f"unknown labels {_labels(unknown)}")
        raise InvalidResponse("probabilities: " + "; ".join(parts))
    values = []
    for label in shown:
        value = answer[label]
        if type(value) is float and 0 <= value < math.inf:  # the common answer, checked fast
            values.append(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidResponse(f"probability of {quote(label)} is not a number")
        try:
            value = float(value)
        except OverflowError:  # an integer beyond a float's range
            raise InvalidResponse(
                f"probability of {quote(label)} is {quote(value)}, not a finite value >= 0"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise InvalidResponse(
                f"probability of {quote(label)} is {value}, not a finite value >= 0"
            )
        values.append(value)
    total = math.fsum(values)
    if abs(total - 1.0) > tolerance:
        raise InvalidResponse(f"probabilities sum to {total:.6g}, outside 1 ± {tolerance:g}")
    return values


def _rows_from_matrix(
    request_ids: Sequence[str] | pl.Series,
    probabilities: np.ndarray,
    labels: Sequence[str],
    latency_ms: Sequence[float | None] | float,
    error_kinds: Sequence[str | None],
    error_messages: Sequence[str | None],
    models: Sequence[str | None] | str | None,
    model_versions: Sequence[str | None] | str | None,
    metadata: Sequence[str | None] | None,
    cache_entries: Sequence[str | None] | None = None,
) -> pl.DataFrame:
    """Build a results table column-wise (no Python object per row for the numbers)."""
    import numpy as np  # see the module's docstring
    import polars as pl

    from decflow.backends.results_schema import RESULTS_SCHEMA
    n = len(request_ids)
    width = len(labels)
    errored = pl.Series("errored", error_kinds, dtype=pl.String).is_not_null()
    matrix = np.ascontiguousarray(probabilities, dtype=np.float64).reshape(n, width)
    safe = np.where(errored.to_numpy()[:, None], 0.0, matrix) if n else matrix
    selected_index = np.argmax(safe, axis=1) if n else np.zeros(0, dtype=np.int64)
    confidence = safe[np.arange(n), selected_index] if n else np.zeros(0)

    def column(values: Any, dtype: Any) -> pl.Series:
        if values is None or isinstance(values, str | float | int):
            # a list, not `pl.repeat`: a query per column costs more than a chunk's rows
            return pl.Series([values] * n, dtype=dtype)
        return pl.Series(values, dtype=dtype)

    frame = pl.DataFrame(
        {
            "request_id": pl.Series(request_ids, dtype=pl.String),
            "probabilities": pl.Series(matrix).cast(pl.List(pl.Float64)),
            "selected": pl.Series(list(labels), dtype=pl.String).gather(selected_index),
            "confidence": confidence,
            "latency_ms": column(latency_ms, pl.Float64),
            "error_kind": pl.Series(error_kinds, dtype=pl.String),
            "error_message": pl.Series(error_messages, dtype=pl.String),
            "model": column(models, pl.String),
            "model_version": column(model_versions, pl.String),
            "metadata_json": column(metadata, pl.String),
            "cache_entry": column(cache_entries, pl.String),
        }
    )
    typed = [pl.col(name).cast(dtype) for name, dtype in RESULTS_SCHEMA.items()]
    if not errored.any():
        return frame if frame.schema == RESULTS_SCHEMA else frame.select(typed)
    nulled = ["probabilities", "selected", "confidence", "latency_ms", "model", "model_version",
              "metadata_json"]
    ok = pl.Series("ok", errored).not_()
    return frame.with_columns(
        [pl.when(ok).then(pl.col(name)).otherwise(None).alias(name) for name in nulled]
    ).select(typed)


def _inputs(requests: pl.DataFrame) -> list[str | dict[str, Any]]:
    return [
        case_input(text, obj)
        for text, obj in zip(requests["input_text"], requests["input_json"], strict=True)
    ]


# Requests turned into Python values a slice at a time as the workers take them: a shard's
# 10,000 at once held its first request back by 5 ms.
ROWS_PER_SLICE = 256


def _request_rows(requests: pl.DataFrame) -> Iterator[tuple[Any, ...]]:
    """(request id, input, shown labels, label order) of each request, in order."""
    for rows in requests.iter_slices(ROWS_PER_SLICE):
        yield from zip(rows["request_id"], _inputs(rows), rows["shown_labels"].to_list(),
                       rows["label_order"].to_list(), strict=True)


def decide_in_process(
    backend: Backend, requests: pl.DataFrame, labels: Sequence[str], tolerance: float
) -> pl.DataFrame:
    """Decide a whole shard with one `decide_batch` call."""
    import numpy as np  # see the module's docstring
    n = requests.height
    orders = requests["label_order"].list.to_array(len(labels)).to_numpy().astype(np.int64)
    batch = RequestBatch(
        request_ids=requests["request_id"],
        input_text=requests["input_text"],
        input_json=requests["input_json"],
        shown_labels=requests["shown_labels"],
        label_orders=orders.reshape(n, len(labels)),
    )
    started = time.perf_counter()
    answer = backend.decide_batch(batch)
    per_request_ms = (time.perf_counter() - started) * 1000.0 / max(n, 1)
    probabilities = np.asarray(answer.probabilities, dtype=np.float64)
    kinds = list(answer.error_kinds)
    messages = list(answer.error_messages)
    # a shard of answers without errors (the common case) has no message to shorten
    if messages.count(None) < n:
        messages = [None if m is None else shorten(escape(m), MAX_ERROR_MESSAGE)
                    for m in messages]
    try:
        model = _kept("model", answer.model)
        model_version = _kept("model_version", answer.model_version)
    except InvalidResponse as exc:  # what the backend named itself cannot be stored
        kinds, messages, model, model_version = [exc.kind] * n, [str(exc)] * n, None, None
    ok = (np.ones(n, dtype=bool) if kinds.count(None) == n
          else np.array([kind is None for kind in kinds], dtype=bool))
    sums = probabilities.sum(axis=1)
    bad = ok & ~(np.isfinite(probabilities).all(axis=1) & (probabilities >= 0).all(axis=1))
    bad |= ok & (np.abs(sums - 1.0) > tolerance)
    for i in np.flatnonzero(bad):
        # A vectorized sum can differ from fsum in the last bits; re-check exactly.
        try:
            check_probabilities(dict(zip(labels, probabilities[i].tolist(), strict=True)),
                                labels, tolerance)
        except InvalidResponse as exc:
            kinds[i], messages[i] = exc.kind, str(exc)
    return _rows_from_matrix(
        requests["request_id"],
        probabilities,
        labels,
        per_request_ms,
        kinds,
        messages if messages.count(None) == n else [_redacted(m) for m in messages],
        _redacted(model),
        _redacted(model_version),
        None,
    )


class RemoteCaller:
    """Runs `backend.predict` over a shard with bounded concurrency, chunked output."""

    def __init__(
        self,
        backend: Backend,
        decision: DecisionSpec,
        tolerance: float,
        max_concurrency: int,
    ) -> None:
        self.backend = backend
        self.decision = decision
        self.tolerance = tolerance
        self.max_concurrency = max_concurrency
        self._specs: dict[tuple[str, ...], DecisionSpec] = {}  # one per label presentation

    def _spec(self, shown: list[str]) -> DecisionSpec:
        key = tuple(shown)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = DecisionSpec(
                self.decision.name, self.decision.type, key, self.decision.description
            )
        return spec

    async def _one(
        self, request_id: str, value: str | dict[str, Any], shown: list[str], order: list[int]
    ) -> tuple[Any, ...]:
        spec = self._spec(shown)
        started = time.perf_counter()
        try:
            prediction: Prediction = await self.backend.predict(
                DecisionRequest(request_id, spec, value)
            )
            latency = (time.perf_counter() - started) * 1000.0
            values = check_probabilities(prediction.probabilities, shown, self.tolerance)
            canonical = [0.0] * len(values)
            for position, label_index in enumerate(order):
                canonical[label_index] = values[position]
            metadata = (
                json.dumps(mask_secret_keys(prediction.metadata), sort_keys=True, default=str)
                if prediction.metadata
                else None
            )
            return (
                request_id,
                canonical,
                latency,
                None,
                None,
                _redacted(_kept("model", prediction.model or self.backend.model)),
                _redacted(_kept("model_version", prediction.model_version)),
                _redacted(_kept("metadata", metadata)),
            )
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # third-party adapter code: any other failure is typed
            if _is_configuration_error(exc):
                raise
            kind, message = error_kind(exc)
            return (request_id, None, None, kind, redact_text(message), None, None, None)

    async def run(
        self,
        requests: pl.DataFrame,
        labels: Sequence[str],
        on_chunk: Callable[[pl.DataFrame], None],
        chunk_size: int = CHUNK_ROWS,
        on_result: Callable[[tuple[Any, ...]], None] | None = None,
        slots: asyncio.Semaphore | None = None,
        on_sent: Callable[[], None] | None = None,
        write_chunk: WriteChunk | None = None,
        answered: dict[str, Future[tuple[Any, ...] | None]] | None = None,
    ) -> None:
        """Decide every request; hand finished rows to `on_chunk` in chunks of `chunk_size`
        (and each one to `on_result` as soon as it is finished, before its concurrency slot
        is released). With `write_chunk`, the chunks go to it instead, in a thread of their
        own (`ChunkWrites`), and are all written and recorded when this returns.
        `answered`: requests sent before this run, by request id (a run's first wave,
        `pipeline/contract_run/first_wave.py`): each one's row, once its future has it, is
        recorded as if just answered, without a call (sent again if the future's row is
        None: that call was cancelled).

        `max_concurrency` workers take the requests in turn from one iterator: a task per
        worker, not per request (a shard holds thousands), and a worker takes its next
        request only once its last result is recorded. With `slots`, shared by callers
        running side by side, each worker holds one from its start to its end, so a
        caller's workers start as another's finish; `on_sent` is called once every
        request has been taken (only the last ones are still in flight)."""
        chunks = ChunkWrites(labels, chunk_size, on_chunk, write_chunk)
        rows = _request_rows(requests)

        async def work() -> None:
            for row in rows:  # one shared iterator: each request goes to one worker
                if stopping():  # a signal arrived: the cancellation is on its way
                    raise asyncio.CancelledError()
                earlier = answered.pop(row[0], None) if answered else None
                result = None if earlier is None else (
                    earlier.result() if earlier.done()
                    else await asyncio.wrap_future(earlier))  # in flight on its own loop
                if result is None:  # (None: the earlier call was cancelled unanswered)
                    result = await self._one(*row)
                # recorded before the worker takes another: at most max_concurrency are
                # unrecorded
                if on_result is not None:
                    on_result(result)
                chunks.add(result)
            if not sent:
                sent.append(True)
                if len(chunks.rows) > self.max_concurrency:
                    # every request is out: the rows finished so far are written while the
                    # last ones are in flight, so the chunk left for after the last answer
                    # holds at most the requests in flight (not up to a chunk's size)
                    chunks.flush()
                if on_sent is not None:
                    on_sent()

        async def worker() -> None:
            if slots is None:
                return await work()
            async with slots:
                return await work()

        sent: list[bool] = []
        workers: list[asyncio.Future[None]] = []
        with calls_in_flight():
            try:
                for _ in range(min(self.max_concurrency, requests.height)):
                    workers.append(asyncio.ensure_future(worker()))
                    # one worker started per turn of the loop: the first request goes out
                    # as the next workers connect, not once all of them have (64: 17 ms)
                    await asyncio.sleep(0)
                await asyncio.gather(*workers)
                await chunks.finish()
            finally:
                for task in workers:
                    task.cancel()
                chunks.close()


# A chunk written in two steps: the call writes it (any thread; the chunks of a run are
# written one at a time, in order) and returns what records it, called in the event loop's
# thread in the same order.
WriteChunk = Callable[["pl.DataFrame"], Callable[[], None]]


# Chunks handed to the writer thread and not yet written, at most (one being written, one
# waiting): more would hold the rows of a fast backend's run in memory.
WAITING_CHUNKS = 2


class ChunkWrites:
    """A run's finished rows handed on in chunks of `size`: to `on_chunk`, or with `write`,
    built and written in a thread of their own, off the event loop (a chunk of 2,048 rows
    costs 5-20 ms, which every answer arriving meanwhile would wait for; polars' encoding
    and the file write let go of the interpreter), and recorded on the loop in the order
    they were handed over. At most `WAITING_CHUNKS` wait to be written: a backend that
    answers faster than chunks are written waits for the writer on the loop, as it did
    when the loop wrote them, so memory stays a few chunks whatever the run's size. A
    write's error is raised on the loop by the next `add`, `finish` or `close`; no chunk
    after it is written (their rows are in the journal, or sent again by `--resume`)."""

    def __init__(self, labels: Sequence[str], size: int,
                 on_chunk: Callable[[pl.DataFrame], None], write: WriteChunk | None) -> None:
        self.labels, self.size, self.on_chunk, self.write = labels, size, on_chunk, write
        self.rows: list[tuple[Any, ...]] = []
        self.pending: collections.deque[Future[Callable[[], None]]] = collections.deque()
        self.executor: ThreadPoolExecutor | None = None
        self.failed = False

    def add(self, row: tuple[Any, ...]) -> None:
        """One more finished row; record the chunks written meanwhile."""
        self.rows.append(row)
        if len(self.rows) >= self.size:
            self.flush()
        while self.pending and self.pending[0].done():
            self._record_first()

    def flush(self) -> None:
        """Hand on the rows finished so far as a chunk (however few)."""
        rows, self.rows = self.rows, []
        if not rows or self.failed:
            return
        if self.write is None:
            self.on_chunk(_rows_from_tuples(rows, self.labels))
            return
        if self.executor is None:  # (a thread started at the first chunk, not before)
            self.executor = ThreadPoolExecutor(1, thread_name_prefix="decflow-chunks")
        self.pending.append(self.executor.submit(self._write, self.write, rows))
        self._record_until(WAITING_CHUNKS)

    def _write(self, write: WriteChunk, rows: list[tuple[Any, ...]]) -> Callable[[], None]:
        return write(_rows_from_tuples(rows, self.labels))

    def _record_until(self, waiting: int) -> None:
        """Wait (holding the loop) for the oldest chunks being written and record them,
        until at most `waiting` are left."""
        while len(self.pending) > waiting:
            self.pending[0].exception()  # waits
            self._record_first()

    def _record_first(self) -> None:
        written = self.pending.popleft()
        try:
            record = written.result()
        except BaseException:
            self.failed = True
            for later in self.pending:  # not started yet: never written
                later.cancel()
            self.pending.clear()
            raise
        record()

    async def finish(self) -> None:
        """Every row handed on: wait on the loop until every chunk is written; record them."""
        self.flush()
        while self.pending:
            await asyncio.wrap_future(self.pending[0])
            self._record_first()
        self.close()

    def close(self) -> None:
        """Hand on the rows left, wait (holding the loop: a run that stops) for the chunks
        being written, record them, and end the thread."""
        try:
            self.flush()
            self._record_until(0)
        finally:
            if self.executor is not None:
                self.executor.shutdown(wait=True, cancel_futures=True)
                self.executor = None


def _kept(field: str, value: Any) -> Any:
    """A text of an answer as it will be stored: valid Unicode (JSON can spell a lone
    surrogate, `"\\ud800"`, which no file can hold) and at most `MAX_ANSWER_FIELD_BYTES`
    (a chunk holds hundreds of answers); anything else is the case's `invalid_response`."""
    if isinstance(value, str):
        try:
            utf8_size(value, MAX_ANSWER_FIELD_BYTES)
        except TextProblem as exc:
            raise InvalidResponse(f"{field} {exc}") from None
    return value


def _redacted(value: Any) -> Any:
    """A text a backend sent, without any credential value in it (`decflow.redaction`);
    anything else as it is (the schema check refuses it later)."""
    return redact_text(value) if isinstance(value, str) else value


def _rows_from_tuples(rows: list[tuple[Any, ...]], labels: Sequence[str]) -> pl.DataFrame:
    import numpy as np  # see the module's docstring

    width = len(labels)
    matrix = np.array(
        [r[1] if r[1] is not None else [np.nan] * width for r in rows], dtype=np.float64
    ).reshape(len(rows), width)
    return _rows_from_matrix(
        [r[0] for r in rows],
        matrix,
        labels,
        [r[2] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
        [r[5] for r in rows],
        [r[6] for r in rows],
        [r[7] for r in rows],
    )


def _is_configuration_error(exc: Exception) -> bool:
    from decflow.errors import DecflowError

    return isinstance(exc, DecflowError)
