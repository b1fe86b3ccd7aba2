"""What the call stage's definition needs of a sequential run without importing its driver
(`sequential.calls`, which a run of the whole suite never loads): the manifest field that
records what it sent, the stage key's settings, and the narrowed inputs it hands on."""

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
