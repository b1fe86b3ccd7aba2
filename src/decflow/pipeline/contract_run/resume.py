"""What `--resume RUN` keeps of a stored contract run, and what a run that never got an
answer leaves behind.

A run's backend and dataset are part of its answers, so `--resume RUN` keeps them; but a
run whose backend never answered (no result, or only errors: a mistyped `-b`, a server that
was down) has nothing to keep. Then `--resume RUN -b NAME` / `-d FILE` replace the stored
backend or dataset, and its errored calls are sent again (they are dropped, with their
folder, before the run continues). Once the run has an answer, a different `-b`/`-d` is
refused: one run never mixes two backends or datasets; start a new run instead.

A new run that stops with an error before any answer is not kept at all (`RunBook`): its
record, contract copy and calls' folder are removed and the error says to run the command
again, so a typo leaves no failed run behind. An interrupted run (Ctrl-C) is always kept.
"""

from __future__ import annotations

import io
import time
from dataclasses import replace
from typing import Any

import polars as pl

from decflow.backends.engine import RESULT_ERROR_KIND
from decflow.errors import DecflowError
from decflow.pipeline.contract_run.call_stage import RESULTS
from decflow.pipeline.contract_run.journal import SUFFIX as JOURNAL
from decflow.pipeline.contract_run.journal import journal_rows
from decflow.pipeline.contract_run.results import CHUNK
from decflow.pipeline.driver import resumable
from decflow.pipeline.spec import RunSpec
from decflow.store.runs import (
    FINISHED,
    RUNNING,
    is_one_name,
    new_run_id,
    now_iso,
    run_state,
)
from decflow.store.store import Store


def calls_key(record: dict[str, Any]) -> str | None:
    """The key of the run's calls folder: its published results, else the calls it was
    making when it stopped (None before its call stage)."""
    published = (record.get("stages") or {}).get(RESULTS.name)
    computing = record.get("computing")
    if isinstance(published, dict):
        key = published.get("key")
    elif isinstance(computing, dict) and computing.get("stage") == RESULTS.name:
        key = computing.get("key")
    else:
        return None
    return str(key) if is_one_name(key) else None


def answered(store: Store, key: str | None) -> bool:
    """Whether the calls folder `key` holds one result that is not an error (in a chunk,
    or in the journal of an attempt that was killed before its chunk)."""
    if key is None:
        return False
    folder = store.stage_prefix(RESULTS.name, key)
    for name in store.list_dir(folder):
        if name.startswith(CHUNK) and name.endswith(".parquet"):
            data = store.read_bytes(f"{folder}/{name}")
            try:
                errors = pl.read_parquet(io.BytesIO(data), columns=["error_kind"])
            except Exception:  # polars' errors have no common base; unreadable: keep it
                return True
            if errors["error_kind"].null_count():
                return True
        elif name.endswith(JOURNAL) and store.is_local:
            rows = journal_rows(store.path(f"{folder}/{name}"))
            if any(len(row) > RESULT_ERROR_KIND and row[RESULT_ERROR_KIND] is None
                   for row in rows):
                return True
    return False


def forget_calls(store: Store, key: str | None) -> None:
    """Remove a calls folder that holds no answer (its errors are sent again)."""
    if key is not None:
        from decflow.store.removal import remove_folder  # only a run that failed early

        remove_folder(store, store.stage_prefix(RESULTS.name, key), "--resume")


def resumed_spec(store: Store, run_id: str, contract_path: str, mode: str, *,
                 backend: str | None = None, dataset: str | None = None) -> RunSpec:
    """The spec of stored run `run_id` to finish it (`--resume`): same mode and contract
    (by hash) as the stopped run, read from the path given now; `backend` and `dataset`,
    when given, replace the stored ones of a run that never got an answer (see module). A
    finished run is never changed: the spec is then a new run that continues it
    (`parent`)."""
    record = resumable(store, run_id, "run", contract_path)
    stored = RunSpec.from_dict(record["spec"])
    if stored.mode != mode:
        raise DecflowError(
            f"run {run_id} was a '{stored.mode}' run; resume it with the same mode"
        )
    changes = {name: value for name, value in (("backend", backend), ("dataset", dataset))
               if value is not None and value != getattr(stored, name)}
    finished = record["status"] in FINISHED
    # a run another process holds is left alone: the run's lock refuses this one
    if not finished and run_state(store, record).status != RUNNING:
        key = calls_key(record)
        if not answered(store, key):
            forget_calls(store, key)  # errors only: sent again, to the backend now named
            stored = replace(stored, backend=changes.get("backend", stored.backend),
                             dataset=changes.get("dataset", stored.dataset))
            changes = {}
    if changes:
        _refuse_changes(stored, run_id, changes)
    if finished:
        return replace(stored, contract_path=contract_path, run_id=new_run_id(),
                       parent=run_id, created_at=now_iso(), created_ns=time.time_ns())
    return replace(stored, contract_path=contract_path)


def _refuse_changes(stored: RunSpec, run_id: str, changes: dict[str, str]) -> None:
    flags = {"backend": "-b", "dataset": "-d"}
    was = {"backend": f"backend '{stored.backend}'",
           "dataset": f"dataset '{stored.dataset}'" if stored.dataset
           else "the contract's dataset"}
    given = " and ".join(f"{flags[name]} {value}" for name, value in changes.items())
    kept = " and ".join(was[name] for name in changes)
    raise DecflowError(
        f"--resume {run_id}: the run has answers from {kept}, which --resume keeps (one run "
        f"never mixes two); drop {given} to finish it, or start a new run without --resume "
        f"to use {'them' if len(changes) > 1 else 'it'}")

