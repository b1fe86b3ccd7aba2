"""The contract a stored run was made with: the copy kept under `runs/<id>/`, so replay
and diff use a run's own contract from any directory."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from decflow.errors import DecflowError
from decflow.store.runs import contract_copy
from decflow.store.store import Store


def stored_contract(report: dict[str, Any], store: Store | None = None) -> Path | None:
    """A local path to the contract copy of the report's run: from `store` when the run is
    there, else from the store the report names; None when neither is reachable."""
    run = report.get("run") or {}
    run_id = run.get("id")
    if not run_id:
        return None
    candidates = [store] if store is not None else []
    if run.get("store"):
        with contextlib.suppress(DecflowError):  # a store URL this machine cannot open
            candidates.append(Store(run["store"]))
    for found in candidates:
        relative = contract_copy(found, run_id)
        if relative is None:
            continue
        if found.is_local:
            return Path(found.path(relative))
        data = found.read_bytes(relative)
        try:
            folder = Path(tempfile.mkdtemp(prefix="decflow-contract-"))
            target = folder / relative.rsplit("/", 1)[-1]
            target.write_bytes(data)
        except OSError as exc:
            raise DecflowError(f"{exc.filename or tempfile.gettempdir()}: cannot write the "
                               f"run's contract ({exc.strerror or exc}); free space there or "
                               "set TMPDIR to a writable folder") from None
        return target
    return None
