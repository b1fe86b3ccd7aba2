"""What a sequential results stage adds to the run for the stages around it: its order and
batches in the stage key, and the narrowed `cases` and `requests` it hands on (the record
under `RECORD` in its manifest). Kept apart from `calls` so that a run of the whole suite
never imports the sequential driver and its statistics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decflow.pipeline.spec import RunSpec
from decflow.store.store import Manifest

RECORD = "sequential"


def sent_inputs(found: Manifest) -> dict[str, Manifest]:
    """After a sequential results stage, the later stages read only the cases it sent: the
    `cases` and `requests` manifests it narrowed (none for a run of the whole suite)."""
    record = found.extra.get(RECORD)
    if record is None:
        return {}
    return {name: Manifest.from_dict(record[name]) for name in ("cases", "requests")}


def sequential_params(spec: RunSpec) -> Mapping[str, Any]:
    """What the stage key of a sequential run includes: its order and batches."""
    return {RECORD: spec.sequential} if spec.sequential else {}
