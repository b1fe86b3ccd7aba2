"""The call-cache mode of a new contract run (`decflow.pipeline.contract_run.call_cache`):
apart from the cache itself, which loads polars, so that a run knows its mode before it
sends its first requests (`first_wave`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from decflow.errors import DecflowError

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract

MODES = ("off", "read-write", "read-only", "refresh")
ENV = "DECFLOW_CALL_CACHE"


def call_cache_mode(option: str | None, contract: Contract) -> str:
    """The mode of a new run: `--call-cache`, else `$DECFLOW_CALL_CACHE`, else the
    contract's `evaluation.call_cache`, else `off`."""
    for value, where in ((option, "--call-cache"), (os.environ.get(ENV) or None, ENV)):
        if value is not None:
            if value not in MODES:
                raise DecflowError(f"{where}: '{value}' is not a call-cache mode (one of "
                                   f"{', '.join(MODES)})")
            return value
    return contract.evaluation.call_cache or "off"
