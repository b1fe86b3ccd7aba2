"""The call-cache mode of a new contract run (`decflow.pipeline.contract_run.call_cache`):
apart from the cache itself, which loads polars, so that a run knows its mode before it
sends its first requests (`first_wave`), and the order seed a sequential run takes under
it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from decflow.errors import DecflowError

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.pipeline.spec import RunSpec

MODES = ("off", "read-write", "read-only", "refresh")
# the modes that answer a request from the cache (refresh asks the backend again)
READING = ("read-write", "read-only")
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


def derived_order_seed(spec: RunSpec) -> Callable[[], int] | None:
    """How a new sequential run of `spec` without a set seed gets its order seed when the
    call cache reads: from its contract and dataset (`inputs_seed`), as a repeated identical
    run must take the same cases to be answered by the cache and write the same report
    (a drawn seed would take other cases and pay for them). None (a seed drawn per run)
    when the cache is off or refreshes: fresh answers are wanted, and so a fresh order."""
    return partial(inputs_seed, spec) if spec.call_cache in READING else None


def inputs_seed(spec: RunSpec) -> int:
    """A seed in [0, 2**32) from the sha256 of the contract's hash and the dataset's (the
    bytes the `cases` stage is keyed by): the same in every process for the same inputs,
    and independent of the backend's answers, as the sequential guarantee needs."""
    from decflow.data.dataset_file import read_dataset
    from decflow.pipeline.contract_run.first_wave import dataset_location
    from decflow.pipeline.spec import load_contract_cached

    loaded = load_contract_cached(spec.contract_path)
    read_path, shown = dataset_location(spec, loaded.contract)
    _, dataset_hash = read_dataset(read_path, shown_path=shown)
    digest = hashlib.sha256(f"decflow order\n{loaded.hash}\n{dataset_hash}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
