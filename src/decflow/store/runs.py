"""Runs in the store: where a run's record, report and contract copy live, and which run is
the accepted baseline of a decision and backend.

Layout (the only module that spells it):

    runs/<run_id>/run.json        the run record `decflow runs` lists
    runs/<run_id>/report.json     the run's report (also diff.json, report.html beside it)
    runs/<run_id>/contract.<ext>  the contract the run used (replay/report from anywhere)
    runs/<run_id>/backend-plan.json  how the backend reads answers for the whole run
    accepted/<decision>/<backend>.json   the accepted baseline run of a decision and backend

Run records are plain JSON written atomically by the store; every runner (in-process,
Prefect, probe, production check) records its runs here in the same shape.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any

from decflow.errors import DecflowError, ReportError
from decflow.redaction import redact
from decflow.store.run_files import FILES, mismatch, recorded, with_file
from decflow.store.store import Store, json_bytes

RUNS = "runs"
RECORD = "run.json"
REPORT = "report.json"
FINISHED = ("pass", "warn", "fail")


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def run_path(run_id: str, name: str = "") -> str:
    """`runs/<run_id>` or, with `name`, a file in it (store-relative)."""
    return f"{RUNS}/{run_id}/{name}" if name else f"{RUNS}/{run_id}"


def report_path(run_id: str) -> str:
    return run_path(run_id, REPORT)


def has_run(store: Store, run_id: str) -> bool:
    return store.exists(run_path(run_id, RECORD))


def read_run_record(store: Store, run_id: str) -> dict[str, Any]:
    if not has_run(store, run_id):
        raise DecflowError(f"no run '{run_id}' in the store {store.url} (see `decflow runs`)")
    record: dict[str, Any] = store.read_json(run_path(run_id, RECORD))
    return record


def write_run_record(store: Store, record: dict[str, Any]) -> None:
    """Write a run's record; the sha256 of its report and view files recorded so far
    (`store.run_files`) are kept."""
    relative = run_path(record["run_id"], RECORD)
    files = recorded(store.read_json(relative)) if store.exists(relative) else {}
    # a backend's model name or details may echo a credential (decflow.redaction)
    store.write_json(relative, redact({**record, **({FILES: files} if files else {}),
                                       "updated_at": now_iso()}))


def write_report(store: Store, run_id: str, report: dict[str, Any], name: str = REPORT) -> str:
    """Store a report of the run (`report.json`, `diff.json`, …) and its sha256 in the
    run's record; returns its store path."""
    return write_run_file(store, run_id, name, json_bytes(report))


def write_run_file(store: Store, run_id: str, name: str, data: bytes) -> str:
    """Write `runs/<run_id>/<name>`, then record its sha256 in the run's record (when the
    run has one); returns the store path. The file goes first: a process killed in
    between leaves a file that no longer matches its record, which readers refuse."""
    relative = run_path(run_id, name)
    store.write_bytes(relative, data)
    if has_run(store, run_id):
        record = store.read_json(run_path(run_id, RECORD))
        if isinstance(record, dict):
            store.write_json(run_path(run_id, RECORD), with_file(record, name, data))
    return relative


def read_run_file(store: Store, run_id: str, name: str) -> bytes:
    """The bytes of `runs/<run_id>/<name>`, if they match the sha256 in the run's record."""
    data = store.read_bytes(run_path(run_id, name))
    files = recorded(store.read_json(run_path(run_id, RECORD))) if has_run(store, run_id) else {}
    problem = mismatch(files, name, data)
    if problem:
        raise ReportError(
            f"{store.uri(run_path(run_id, name))} {problem}; it is not read. Write it again "
            f"from the run's stored stages (decflow report {run_id} -c CONTRACT) or run the "
            "check again"
        )
    return data


def read_run_json(store: Store, run_id: str, name: str) -> Any:
    """`read_run_file`, parsed as JSON."""
    return json.loads(read_run_file(store, run_id, name))


def damaged_files(store: Store, record: dict[str, Any]) -> list[str]:
    """The files a run recorded (by name) that are missing or no longer match."""
    run_id, files = record.get("run_id"), recorded(record)
    if not isinstance(run_id, str):
        return []
    damaged = []
    for name in map(str, files):
        relative = run_path(run_id, name)
        data = store.read_bytes(relative) if store.exists(relative) else None
        if mismatch(files, name, data):
            damaged.append(name)
    return damaged



def contract_copy(store: Store, run_id: str) -> str | None:
    """The store path of the contract copy kept with the run, if any."""
    for name in store.list_dir(run_path(run_id)):
        if name.startswith("contract."):
            return run_path(run_id, name)
    return None


def list_runs(store: Store) -> list[dict[str, Any]]:
    """Every run record in the store, oldest first (run ids start with their UTC time)."""
    return [read_run_record(store, run_id) for run_id in store.list_dir(RUNS)
            if has_run(store, run_id)]


def accepted_path(decision: str, backend: str) -> str:
    return f"accepted/{decision}/{backend}.json"


def accept_run(store: Store, run_id: str) -> dict[str, Any]:
    """Mark a finished contract run as the accepted baseline of its decision and backend."""
    record = read_run_record(store, run_id)
    if record.get("kind", "run") != "run":
        raise DecflowError(f"run {run_id} is a {record['kind']}; only contract runs can be a "
                           "regression baseline")
    if record["status"] not in FINISHED:
        raise DecflowError(f"run {run_id} did not finish (status {record['status']}); "
                           "finish it with --resume before accepting it")
    entry = {
        "run_id": run_id,
        "decision": record["decision"],
        "backend": record["backend"],
        "contract_hash": record["contract_hash"],
        "dataset_hash": record["dataset_hash"],
        "accepted_at": now_iso(),
    }
    store.write_json(accepted_path(record["decision"], record["backend"]), entry)
    return entry


def accepted_run(store: Store, decision: str, backend: str) -> str | None:
    """The accepted baseline run id of a decision and backend, or None."""
    relative = accepted_path(decision, backend)
    if not store.exists(relative):
        return None
    run_id: str = store.read_json(relative)["run_id"]
    return run_id
