"""Runs in the store: where a run's record, report and contract copy live, and which run is
the accepted baseline of a decision and backend.

Layout (the only module that spells it):

    runs/<run_id>/run.json        the run record `decflow runs` lists
    runs/<run_id>/report.json     the run's report (also diff.json, report.html beside it)
    runs/<run_id>/contract.<ext>  the contract the run used (replay/report from anywhere)
    runs/<run_id>/backend-plan.json  how the backend reads answers for the whole run
    runs/<run_id>/plan-requests.json  the model requests making that plan took
    runs/<run_id>-noise<K>/      a noise run: run <run_id>'s original requests re-sent K times
    runs/<run_id>/lock            held while a process works on the run (`store.locks`)
    accepted/<decision>/<backend>.json   the accepted baseline run of a decision and backend

Run records are plain JSON written atomically by the store; every runner (in-process,
Prefect, probe, production check) records its runs here in the same shape.

A run's state (`run_state`) is its record's status, checked against its lock: `running`
only while a process holds the run's lock; a record left `running` by a process that was
killed (`kill -9`, a lost machine) is `interrupted`, like one stopped by SIGINT/SIGTERM;
`failed` when the run stopped with an error (the record keeps the error line); `pass`,
`warn`, `fail` once it finished.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from decflow.errors import DecflowError, ReportError
from decflow.redaction import redact
from decflow.store.locks import LEASE, LOCK, Lock, describe, holder_of
from decflow.store.run_files import FILES, mismatch, recorded, with_file
from decflow.store.store import (
    DamagedArtifact,
    Piece,
    Store,
    WrittenItems,
    json_bytes,
    json_pieces,
    json_text,
)

RUNS = "runs"
RECORD = "run.json"
REPORT = "report.json"
FINISHED = ("pass", "warn", "fail")
RUNNING, FAILED, INTERRUPTED = "running", "failed", "interrupted"
ACCEPT_WAIT_S = 30.0


# One name in a store path (a run id, a file of a run, a decision or backend of an accepted
# baseline): no folder separator, no control character, not `.` or `..`.
_ONE_NAME = re.compile(r"[^/\x00-\x1f\x7f]+\Z")


def is_one_name(text: object) -> bool:
    """Whether `text` names one file or folder (no `/`, `..`, control characters)."""
    return isinstance(text, str) and text not in (".", "..") and bool(_ONE_NAME.match(text))


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
    return is_one_name(run_id) and store.exists(run_path(run_id, RECORD))


def read_run_record(store: Store, run_id: str) -> dict[str, Any]:
    if not has_run(store, run_id):
        raise DecflowError(f"no run '{run_id}' in the store {store.url} (see `decflow runs`)")
    try:
        record = store.read_json(run_path(run_id, RECORD))
    except DamagedArtifact as exc:
        raise DamagedArtifact(exc.uri, f"{exc.problem}, so run {run_id} cannot be read",
                              "run it again for a new run (and remove this one with "
                              f"`decflow runs rm {run_id}`)") from None
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
        raise DamagedArtifact(store.uri(run_path(run_id, RECORD)),
                              f"is damaged: not a run record, so run {run_id} cannot be read",
                              "run it again for a new run (and remove this one with "
                              f"`decflow runs rm {run_id}`)")
    if record["run_id"] != run_id:  # every reader takes the run's paths from its id
        raise DamagedArtifact(store.uri(run_path(run_id, RECORD)),
                              f"is damaged: it names run '{record['run_id']}', not run "
                              f"{run_id} whose folder holds it, so run {run_id} cannot be read",
                              f"remove it with `decflow runs rm {run_id}`")
    return record


# The record this process last wrote for each local run, beside the file's identity (inode,
# mtime, size) just after the write: the next update of the record starts from it instead
# of parsing run.json again (a contract run rewrites its record ~10 times, ~0.4 MB each
# with per-case paraphrase provenance). Another writer changes the identity, and then the
# file is read as before.
_written: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _file_identity(path: str) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size


def _stored_record(store: Store, relative: str) -> Any:
    """The run record as stored at `relative` (None when there is none)."""
    if store.is_local:
        path = store.path(relative)
        identity = _file_identity(path)
        if identity is None:
            return None
        last = _written.get(path)
        if last is not None and last[0] == identity:
            return last[1]
    elif not store.exists(relative):
        return None
    return store.read_json(relative)


# The JSON of the stage manifests a record embeds, by the id of their dict (kept alive
# beside it): the driver hands the same dict for a manifest on every update
# (`RunBook.record`), a manifest never changes once published, and encoding them again on
# each of a run's ~10 updates was most of the cost of a write (one holds a value per case).
_stage_json: dict[int, tuple[Any, str]] = {}
_STAGES_CACHED = 64
# Stands for the record's stages while the rest is encoded (a process-unique string).
_STAGES_HOLE = f"\x00stages {secrets.token_hex(8)}"


def _record_bytes(record: dict[str, Any]) -> bytes:
    """`json_bytes(record)`, with each stage manifest's JSON taken from `_stage_json`."""
    stages = record.get("stages")
    if not isinstance(stages, dict) or not stages:
        return json_bytes(record)
    encoded = []
    for name, stage in stages.items():
        found = _stage_json.get(id(stage))
        if found is None or found[0] is not stage:
            if len(_stage_json) >= _STAGES_CACHED:
                del _stage_json[next(iter(_stage_json))]
            found = _stage_json[id(stage)] = (stage, json_text(stage))
        encoded.append(f"{json_text(name)}:{found[1]}")
    rest = json_bytes({**record, "stages": _STAGES_HOLE})
    return rest.replace(json_text(_STAGES_HOLE).encode(),
                        ("{" + ",".join(encoded) + "}").encode(), 1)


def _store_record(store: Store, relative: str, record: dict[str, Any]) -> None:
    store.write_bytes(relative, _record_bytes(record))
    if store.is_local:
        path = store.path(relative)
        identity = _file_identity(path)
        if identity is not None:
            _written[path] = (identity, record)


def write_run_record(store: Store, record: dict[str, Any]) -> None:
    """Write a run's record; the sha256 of its report and view files recorded so far
    (`store.run_files`) are kept."""
    relative = run_path(record["run_id"], RECORD)
    files = recorded(_stored_record(store, relative))
    # a backend's model name or details may echo a credential (decflow.redaction)
    _store_record(store, relative, redact({**record, **({FILES: files} if files else {}),
                                           "updated_at": now_iso()}))


def write_report(store: Store, run_id: str, report: dict[str, Any], name: str = REPORT, *,
                 per_case: Sequence[str] = (), plain: bool = False,
                 written: Mapping[str, WrittenItems] | None = None) -> str:
    """Store a report of the run (`report.json`, `diff.json`, …) and its sha256 in the
    run's record; returns its store path. `per_case`, `plain`, `written`: see
    `json_pieces`."""
    return write_run_file(store, run_id, name,
                          json_pieces(report, per_case=per_case, plain=plain, written=written))


def write_run_file(store: Store, run_id: str, name: str, data: bytes | Sequence[Piece]) -> str:
    """Write `runs/<run_id>/<name>` (`data`: its bytes, or their pieces in order), then
    record its sha256 in the run's record (when the run has one); returns the store path.
    The file goes first: a process killed in between leaves a file that no longer matches
    its record, which readers refuse."""
    relative = run_path(run_id, name)
    store.write_bytes(relative, data)
    if is_one_name(run_id):
        record = _stored_record(store, run_path(run_id, RECORD))
        if isinstance(record, dict):
            _store_record(store, run_path(run_id, RECORD), with_file(record, name, data))
    return relative


def read_run_file(store: Store, run_id: str, name: str) -> bytes:
    """The bytes of `runs/<run_id>/<name>`, if they match the sha256 in the run's record."""
    data = store.read_bytes(run_path(run_id, name))
    files = recorded(store.read_json(run_path(run_id, RECORD))) if has_run(store, run_id) else {}
    problem = mismatch(files, name, data)
    if problem:
        record = store.read_json(run_path(run_id, RECORD))
        raise ReportError(f"{store.uri(run_path(run_id, name))} {problem}; it is not read: "
                          f"{fresh_report_advice(record if isinstance(record, dict) else {})}")
    return data


def fresh_report_advice(record: dict[str, Any]) -> str:
    """How to get a report again for a run whose report or view was edited: a contract
    run's stored stages give one, with no backend call, as a new run that continues it;
    anything else is run again."""
    run_id, resume = record.get("run_id", "RUN"), resume_command(record)
    if record.get("kind", "run") == "run" and resume:
        return ("write a fresh report from the run's stored stages, with no backend call, "
                f"as a new run: `{resume} --from-stage summary`; then `decflow runs rm "
                f"{run_id} --force` removes the damaged run (the new run keeps its stages)")
    again = "check" if record.get("kind") == "check" else "command"
    return f"run the {again} again; `decflow runs rm {run_id}` removes the damaged run"


def read_run_json(store: Store, run_id: str, name: str) -> Any:
    """`read_run_file`, parsed as JSON."""
    return json.loads(read_run_file(store, run_id, name))


def no_longer_match(files: list[str]) -> str:
    """`report.html no longer matches`, `report.json, report.html no longer match`."""
    return f"{', '.join(files)} no longer {'matches' if len(files) == 1 else 'match'}"


def damaged_files(store: Store, record: dict[str, Any]) -> list[str]:
    """The files a run recorded (by name) that are missing or no longer match."""
    run_id, files = record.get("run_id"), recorded(record)
    if not isinstance(run_id, str):
        return []
    damaged = []
    for name in map(str, files):
        if not is_one_name(name):  # a name edited to lead out of the run's folder
            damaged.append(name)
            continue
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


@dataclass(frozen=True)
class Listing:
    """Every run in the store, oldest first (run ids start with their UTC time): the
    readable records, and the runs whose record is damaged (the error for each), among
    them the `unrecorded` folders (files but no record, and no process setting them up)."""

    records: list[dict[str, Any]]
    damaged: dict[str, DamagedArtifact]  # by run id
    unrecorded: frozenset[str] = frozenset()


def creation_order(record: dict[str, Any]) -> tuple[str, int, str]:
    """A run record's sort key, oldest first: a run id starts with its creation time to the
    second (`YYYYMMDD-HHMMSS`); runs made within one second sort by the nanosecond their
    spec records (`created_ns`), not by their ids' random suffix, which only orders runs
    recorded without it."""
    run_id = str(record["run_id"])
    spec = record.get("spec")
    made = spec.get("created_ns") if isinstance(spec, dict) else None
    return run_id[:15], made if isinstance(made, int) else 0, run_id


def list_runs(store: Store) -> Listing:
    records, damaged, unrecorded = [], {}, set()
    for run_id in store.list_dir(RUNS):
        if not has_run(store, run_id):
            leftover = unrecorded_run(store, run_id)
            if leftover is not None:
                damaged[run_id] = leftover
                unrecorded.add(run_id)
            continue
        try:
            records.append(read_run_record(store, run_id))
        except DamagedArtifact as exc:
            damaged[run_id] = exc
    return Listing(records, damaged, frozenset(unrecorded))


def unrecorded_run(store: Store, run_id: str) -> DamagedArtifact | None:
    """What is wrong with run folder `run_id` when it holds files but no record, and no
    process is setting it up (a run killed, or stopped by a full disk, between its contract
    copy and its first record; a record deleted): None for a run folder with a record, an
    empty one, or one whose lock is held (a run starting)."""
    if not is_one_name(run_id) or has_run(store, run_id):
        return None
    files = [name for name in store.list_dir(run_path(run_id)) if name not in (LOCK, LEASE)]
    if not files or holder_of(store, run_path(run_id)) is not None:
        return None
    return DamagedArtifact(store.uri(run_path(run_id, RECORD)),
                           "does not exist: the run stopped before it was recorded, or its "
                           "record was deleted",
                           "`decflow runs gc` removes what is left of it (the folder "
                           f"{store.uri(run_path(run_id))})")


def discard_unrecorded(store: Store, run_id: str) -> None:
    """Remove what a run wrote before its first record (its contract copy, backend plan)
    when it stops before recording itself (a full disk), so it leaves no folder behind;
    a recorded run is left as it is."""
    if has_run(store, run_id):
        return
    for name in store.list_dir(run_path(run_id)):
        if name not in (LOCK, LEASE):
            store.discard(run_path(run_id, name))


def run_lock(store: Store, run_id: str) -> Lock:
    """The lock a process holds while it works on run `run_id`."""
    return Lock(store, run_path(run_id), f"run {run_id}")


def resume_command(record: dict[str, Any]) -> str | None:
    """The command line that finishes a stopped contract run, as its runner recorded it
    (None for other kinds, and for runs recorded before it was)."""
    resume = record.get("resume")
    return resume if isinstance(resume, str) else None


@dataclass(frozen=True)
class RunState:
    """A run's true state: `status` (running, interrupted, failed, pass, warn, fail) and
    what to say about it (`detail`: who holds it, the error line, how to resume it)."""

    status: str
    detail: str = ""


def run_state(store: Store, record: dict[str, Any]) -> RunState:
    status = str(record.get("status"))
    resume = resume_command(record)
    if status == RUNNING:
        holder = holder_of(store, run_path(record["run_id"]))
        if holder is not None:
            return RunState(RUNNING, f"held by {describe(holder)}")
        status = INTERRUPTED  # its process ended without recording an end: killed
    if status == INTERRUPTED:
        return RunState(INTERRUPTED, f"resume it: {resume}" if resume else "run it again")
    if status == FAILED:
        error = str(record.get("error") or "no error recorded").splitlines()[0]
        return RunState(FAILED, error)
    return RunState(status)


NOISE_KIND = "noise"
_NOISE = "-noise"


def noise_run_id(parent: str, reruns: int) -> str:
    """The child run that re-sends run `parent`'s original requests `reruns` times."""
    return f"{parent}{_NOISE}{reruns}"


def noise_runs_of(store: Store, parent: str) -> list[str]:
    """The ids of run `parent`'s noise runs in the store (any state)."""
    prefix = f"{parent}{_NOISE}"
    return [name for name in store.list_dir(RUNS)
            if name.startswith(prefix) and name[len(prefix):].isdigit()
            and has_run(store, name)]


def accepted_path(decision: str, backend: str) -> str:
    return f"accepted/{decision}/{backend}.json"


def _not_passing(store: Store, run_id: str) -> str:
    """What did not pass in run `run_id`: its report's headline, else its checks that did
    not pass, as `gate (status)` items (reports older than headlines)."""
    try:
        report = store.read_json(report_path(run_id))
        if isinstance(report.get("headline"), str):
            return str(report["headline"])
        items = [f"{c['gate']} ({c['status']})" for c in report.get("checks") or []
                 if isinstance(c, dict) and c.get("status") != "pass"]
    except (DecflowError, TypeError, KeyError, AttributeError):
        return "its report cannot be read"
    shown = "; ".join(items[:6]) + (f"; +{len(items) - 6} more" if len(items) > 6 else "")
    return shown or "no failing check is listed"


def accept_run(store: Store, run_id: str, *, force: bool = False) -> dict[str, Any]:
    """Mark a finished contract or check run as the accepted baseline of its decision and
    backend (`records` for check runs). A run that did not PASS needs `force`. Accepts of
    one decision take a lock, so two at once leave one consistent entry, and the second
    says which run it replaced (`replaces`)."""
    record = read_run_record(store, run_id)
    kind = record.get("kind", "run")
    if kind not in ("run", "check"):
        raise DecflowError(f"run {run_id} is a {kind}; only contract runs and check runs can "
                           "be a baseline")
    state = run_state(store, record)
    if state.status not in FINISHED:
        raise DecflowError(f"run {run_id} did not finish (it is {state.status}"
                           + (f": {state.detail}" if state.detail else "")
                           + "); finish it before accepting it")
    damaged = damaged_files(store, record)
    if damaged:  # as `decflow runs` lists it: its report or views cannot be trusted
        raise DecflowError(f"run {run_id} is damaged: {no_longer_match(damaged)} "
                           "the sha256 in its run.json (edited since the run), so it cannot "
                           f"be a baseline ({fresh_report_advice(record)}), then accept the "
                           "new run")
    decision, backend = record.get("decision"), record.get("backend")
    if not (is_one_name(decision) and is_one_name(backend)):
        raise DamagedArtifact(store.uri(run_path(run_id, RECORD)),
                              f"is damaged: decision {decision!r} or backend {backend!r} is "
                              "not a name, so the run cannot be a baseline")
    decision, backend = str(decision), str(backend)
    if state.status != "pass" and not force:
        raise DecflowError(f"run {run_id} is {state.status.upper()}, not PASS: "
                           f"{_not_passing(store, run_id)}; accept it anyway with "
                           f"`decflow runs accept {run_id} --force`")
    relative = accepted_path(decision, backend)
    # a second accept waits for the first (they take milliseconds), then replaces it
    with Lock(store, f"accepted/{decision}", f"the accepted baselines of '{decision}'",
              wait_s=ACCEPT_WAIT_S):
        previous = accepted_run(store, decision, backend)
        entry = {
            "run_id": run_id,
            "kind": kind,
            "decision": decision,
            "backend": backend,
            "status": state.status,
            "forced": state.status != "pass",
            "contract_hash": record.get("contract_hash"),
            "dataset_hash": record.get("dataset_hash"),
            "accepted_at": now_iso(),
            "replaces": previous if previous != run_id else None,
        }
        store.write_json(relative, entry)
    return entry


def is_accepted(store: Store, record: dict[str, Any]) -> bool:
    """Whether the run of `record` is the accepted baseline of its decision and backend."""
    try:
        found = accepted_run(store, str(record.get("decision")), str(record.get("backend")))
    except DecflowError:
        return False
    return found == record.get("run_id")


def accepted_run(store: Store, decision: str, backend: str) -> str | None:
    """The accepted baseline run id of a decision and backend, or None."""
    relative = accepted_path(decision, backend)
    if not store.exists(relative):
        return None
    entry = store.read_json(relative)
    run_id = entry.get("run_id") if isinstance(entry, dict) else None
    if not isinstance(run_id, str):
        raise DamagedArtifact(store.uri(relative), "is damaged: not an accepted-baseline entry",
                              "accept a run again (`decflow runs accept RUN`)")
    return run_id
