"""Work a command needs only once its run is done (the report's text and HTML views, the
report model's validators), done while the run waits on its backend.

A remote run spends most of its calls waiting on sockets, so a thread that imports in the
meantime gets the interpreter then; done before the first request, the same work would
delay every call, and after the last answer it adds to the run's wall time. The thread is
joined before the run's verdict stage, so no stage runs while another thread imports (two
threads importing modules that import each other could each see the other's half-imported
module) or builds a model the stage validates.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable

from decflow import interrupts


def run_views() -> None:
    """What showing a contract run's report needs first: the text and HTML views, numpy's
    lazily loaded modules the summary's calibration figures use, and the run report
    models' validators (built on first use: `report.model` defers them)."""
    for name in ("decflow.views.outputs", "decflow.views.text", "decflow.views.html",
                 "numpy.random", "numpy.fft"):
        importlib.import_module(name)
    from decflow.report.run_report import RunReport, RunView

    RunReport.model_rebuild()
    RunView.model_rebuild()


class Ahead:
    """Runs `work` in a daemon thread from `start()` until `join()`."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.thread: threading.Thread | None = None

    def _run(self) -> None:
        # what fails here fails again, with its error, where it is needed
        with contextlib.suppress(Exception):
            self.work()

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="decflow-ahead", daemon=True)
            self.thread.start()

    def join(self) -> None:
        if self.thread is not None:
            interrupts.join(self.thread)

    def during(self, stage: str, upstream: str) -> Callable[[str, object], None]:
        """A driver's `on_stage` hook that works while `stage` computes: from the end of
        its `upstream` stage (so the work never delays what comes before it) to its own
        end."""

        def on_stage(name: str, _manifest: object) -> None:
            if name == upstream:
                self.start()
            elif name == stage:
                self.join()

        return on_stage
