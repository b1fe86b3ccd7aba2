"""Send decflow's own log records (e.g. "stage cases: cache hit") to the Prefect run log.

Pure pipeline code logs through `logging.getLogger("decflow…")` and knows nothing of
Prefect; inside a flow or task run this handler re-emits those records on the run logger,
so a cache hit shows up in the Prefect UI next to the task that hit it.
"""

from __future__ import annotations

import logging

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

PIPELINE_LOGGER = "decflow"


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


def install() -> None:
    """Idempotent: attach the forwarder once per process (also in Dask workers)."""
    logger = logging.getLogger(PIPELINE_LOGGER)
    if any(isinstance(h, RunLogForwarder) for h in logger.handlers):
        return
    logger.addHandler(RunLogForwarder())
    # inside a run the run logger shows the records; root must not print them a second time
    logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
