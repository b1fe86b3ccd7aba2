"""A probe as a run in the store, like every other decflow run.

`stages/probe_observations/<key>/` holds the observations table (one row per agent call);
`runs/<id>/run.json` is the record `decflow runs` lists and `runs/<id>/report.json` the
report `decflow report RUN` shows. `load` rebuilds the result from the stored table
without calling the agent.
"""

from __future__ import annotations

import hashlib
from typing import Any

from decflow.errors import DecflowError
from decflow.probe.analyse import ProbeSettings
from decflow.probe.result import ProbeResult, build_result
from decflow.store.runs import (
    new_run_id,
    now_iso,
    read_run_record,
    write_report,
    write_run_record,
)
from decflow.store.store import Manifest, open_store, stage_key

STAGE = "probe_observations"
STAGE_VERSION = "1"


def _inputs_hash(inputs: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for text in inputs:
        digest.update(text.encode())
        digest.update(b"\x1e")
    return "sha256:" + digest.hexdigest()


def save(store: Any, frame: Any, settings: ProbeSettings) -> ProbeResult:
    opened = open_store(store)
    run_id, created = new_run_id(), now_iso()
    # Agent calls are never reused across runs, so the run id is part of the key.
    key = stage_key(STAGE, STAGE_VERSION, "", [], {"run_id": run_id})
    manifest = opened.publish(STAGE, key, frame)
    result = build_result(frame, settings, run_id=run_id, created_at=created)
    report = result.to_dict()
    record = {
        "run_id": run_id,
        "kind": "probe",
        "decision": settings.agent,
        "mode": "probe",
        "backend": "python",
        "status": report["status"],
        "created_at": created,
        "contract_hash": None,
        "dataset_hash": _inputs_hash(result.inputs),
        "settings": settings.to_dict(),
        "stages": {STAGE: manifest.to_dict()},
    }
    write_run_record(opened, record)
    write_report(opened, run_id, report)  # after the record, which keeps its sha256
    return result


def load(store: Any, run_id: str) -> ProbeResult:
    """The stored probe, re-analysed from its observations (no agent call)."""
    opened = open_store(store)
    record = read_run_record(opened, run_id)
    if record.get("kind") != "probe":
        raise DecflowError(f"run {run_id} is not a probe (mode {record.get('mode')})")
    manifest = Manifest.from_dict(record["stages"][STAGE])
    frame = opened.read(manifest)
    settings = ProbeSettings.from_dict(record["settings"])
    return build_result(frame, settings, run_id=run_id, created_at=record["created_at"])
