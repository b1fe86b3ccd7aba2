"""decflow's logging under Prefect.

Pure pipeline code logs through `logging.getLogger("decflow…")` and knows nothing of
Prefect; inside a flow or task run `RunLogForwarder` re-emits those records on the run
logger, so a cache hit shows up in the Prefect UI next to the task that hit it.
`QuietUserErrors` keeps Prefect from printing a traceback for a `DecflowError` (bad input,
unhealthy backend: its message says what to do), as the CLI does, or for a task that ended
Failed as a verdict (the judging task of a FAIL), unless DECFLOW_DEBUG=1,
and drops the records of a `ReportedFailure` (a gate verdict the run's final state already
states in one line; Prefect's process runner would log it again with a traceback).
"""

from __future__ import annotations

import logging
import os

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

from decflow.errors import DecflowError

PIPELINE_LOGGER = "decflow"
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class RunLogForwarder(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            logger = get_run_logger()
        except MissingContextError:
            # outside a run: what propagation to the root logger would have done
            root = logging.getLogger()
            if record.levelno >= root.getEffectiveLevel():
                root.handle(record)
            return
        logger.log(record.levelno, "%s", record.getMessage())


class ReportedFailure(Exception):
    """A failure the flow run's final state reports in one line (see `flows.common`)."""


class QuietUserErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if os.environ.get("DECFLOW_DEBUG") == "1":
            return True
        if isinstance(error, ReportedFailure):
            return False
        # a user error, or a task that ended Failed as a verdict without raising (the
        # judging task): one line, no traceback (`NoneType: None` for the latter)
        if isinstance(error, DecflowError) or (record.exc_info and error is None):
            record.exc_info = None
            record.exc_text = None
        return True


def install() -> None:
    """Idempotent: attach the forwarder once per process (also in Dask workers)."""
    logger = logging.getLogger(PIPELINE_LOGGER)
    if any(isinstance(h, RunLogForwarder) for h in logger.handlers):
        return
    for name in RUN_LOGGERS:
        logging.getLogger(name).addFilter(QuietUserErrors())
    logger.addHandler(RunLogForwarder())
    # inside a run the run logger shows the records; root must not print them a second time
    logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
