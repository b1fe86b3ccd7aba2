"""Work a command needs only once its run's calls are done (the later stages' code, the
report's text and HTML views, the report model's validators), done while the run waits on
its backend.

A remote run spends most of its calls waiting on sockets, so a thread that imports in the
meantime gets the interpreter then; done before the first request, the same work would
delay every call, and after the last answer it adds to the run's wall time. The thread is
joined before the run's verdict stage, so no stage runs while another thread imports (two
threads importing modules that import each other could each see the other's half-imported
module) or builds a model the stage validates.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from decflow import interrupts
from decflow.switching import switch_interval

if TYPE_CHECKING:
    import polars as pl

    from decflow.pipeline.spec import RunSpec
    from decflow.pipeline.stage import Progress, ProgressFactory
    from decflow.store.store import Part, Store

# the result chunks of a run's originals as they are stored; None: the calls are over
Chunks = queue.SimpleQueue["tuple[Part, pl.DataFrame] | None"]

SWITCH_INTERVAL_S = 0.001


def after_calls(spec: RunSpec, store: Store, chunks: Chunks) -> Callable[[], None]:
    """What a contract run of `spec` (in `store`) needs first once its calls are done: the
    code of its later stages, numpy's lazily loaded modules the summary's calibration
    figures use, the run report models' validators (built on first use: `report.model`
    defers them), the text and HTML views the command shows the report with (and the
    patterns they escape its texts with), the
    per-case results' part its cases decide, and then their `result`s, each result chunk
    of `chunks` as it is stored (`written_chunks`), until the calls are over."""

    def work() -> None:
        from decflow.pipeline.contract_run.later_stages import load_later_stages

        load_later_stages(spec)
        for name in ("numpy.random", "numpy.fft", "numpy.ma", "decflow.views.outputs",
                     "decflow.views.text", "decflow.views.html"):
            importlib.import_module(name)
        from decflow.report.run_report import build_validators
        from decflow.untrusted import compile_patterns

        build_validators()
        compile_patterns()
        # What the imports above and the cases' results below leave lives at least until
        # the summary: frozen, the collections during the calls skip it (unfrozen, one
        # walked it all in 25-30 ms with the event loop stopped; the call stage unfreezes
        # when it ends, `pipeline/stage.py`)
        gc.freeze()
        _prepare_case_results(spec, store)
        gc.freeze()
        _prepare_answers(spec, chunks)

    return work


def _prepare_case_results(spec: RunSpec, store: Store) -> None:
    """The per-case part of the report that the cases alone decide (stored before the
    calls; the run record names them), made for the summary to take; with their JSON as
    their answers come, when the calls wait on a remote backend (an in-process one keeps
    the interpreter busy: nothing would be gained) and go in the cases' order."""
    from decflow.pipeline.contract_run.golden_section import prepare_case_results
    from decflow.pipeline.contract_run.results import overlaps_shards
    from decflow.store.runs import read_run_record
    from decflow.store.store import Manifest

    cases = (read_run_record(store, spec.run_id).get("stages") or {}).get("cases")
    if isinstance(cases, dict):
        prepare_case_results(store, Manifest.from_dict(cases),
                             with_json=not spec.sequential and overlaps_shards(spec))


def _prepare_answers(spec: RunSpec, chunks: Chunks) -> None:
    """Each stored chunk's per-case `result`s (`golden_section.prepare_answers`) until the
    calls are over (None)."""
    from decflow.pipeline.contract_run.golden_section import prepare_answers
    from decflow.pipeline.spec import load_contract_cached

    contract = load_contract_cached(spec.contract_path).contract
    # what the results stage records of the backend (`results.backend_info`); the
    # summary takes these results only if it names the same
    backend = {"name": spec.backend, "provider": contract.backend_config(spec.backend).provider}
    for part, frame in iter(chunks.get, None):
        prepare_answers(contract, backend, part, frame)


@contextlib.contextmanager
def written_chunks(chunks: Chunks) -> Iterator[None]:
    """In the block, the result chunks of the originals this process stores are also put
    in `chunks` (`results.chunk_readers`)."""
    from decflow.pipeline.contract_run.results import chunk_readers

    def read(part: Part, frame: pl.DataFrame) -> None:
        chunks.put((part, frame))

    chunk_readers.append(read)
    try:
        yield
    finally:
        chunk_readers.remove(read)


class Ahead:
    """Runs `work` in a daemon thread once a run's backend has answered its first call (so
    every request of the first wave is out before the thread takes the interpreter) until
    `join()`, which the driver's `on_stage` hook calls at the end of the call stage. What
    never started is left to whoever needs it (a run without calls, a stored one)."""

    def __init__(self, work: Callable[[], None], chunks: Chunks | None = None,
                 calls: str = "calls", stage: str = "results") -> None:
        """`chunks`: the queue `work` reads till a None, which `join()` puts."""
        self.work, self.chunks, self.calls, self.stage = work, chunks, calls, stage
        self.thread: threading.Thread | None = None

    def _run(self) -> None:
        # At the process's own scheduling priority, never lower: this thread and the event
        # loop hold the interpreter in turns, and a lowered thread that a busy machine
        # keeps off the CPU keeps the interpreter too, so the loop waits for it (at nice
        # 19 a whole run beside two CPU-bound processes took 20.6 s, not 7.8 s:
        # bench/README.md).
        # A thread waiting for the interpreter asks for it after the switch interval
        # (5 ms), shortened while this runs, so an answer waits less for the loop.
        # what fails here fails again, with its error, where it is needed
        with switch_interval(SWITCH_INTERVAL_S), contextlib.suppress(Exception):
            self.work()

    def _start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="decflow-ahead", daemon=True)
            self.thread.start()

    def join(self) -> None:
        if self.chunks is not None:
            # the calls are over: the chunks not taken yet are left to the summary, which
            # works them at once rather than waiting for this thread to reach them
            with contextlib.suppress(queue.Empty):
                while True:
                    self.chunks.get_nowait()
            self.chunks.put(None)
        if self.thread is not None:
            interrupts.join(self.thread)

    def progress(self, factory: ProgressFactory) -> ProgressFactory:
        """`factory`, whose progress of the calls starts the work at the first answer."""

        def make(name: str, total: int | None) -> Progress:
            inner = factory(name, total)
            if name != self.calls:
                return inner

            def update(done: int, total_now: int | None) -> None:
                if self.thread is None and done:
                    self._start()
                inner(done, total_now)

            return update

        return make

    def on_stage(self, name: str, _manifest: object) -> None:
        """The driver's hook: the call stage's end joins the work (no stage runs beside
        it)."""
        if name == self.stage:
            self.join()
