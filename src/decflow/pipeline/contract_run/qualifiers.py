"""What a reader must know about a run's verdict beside its checks: the headline's
qualifiers (PRODUCT §4, "Headlines"). They never change the verdict; they say what it rests
on where that is less than it looks:

- `zero_limit`: a sequential run passed a limit-0 gate as a share below
  `sequential.zero_limit`, without seeing every case (`sequential_gates.zero_limit_unseen`).

A FAIL stands whatever its passing gates rest on, so only a PASS or a WARN is qualified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decflow.gates.headline import Qualifier
from decflow.pipeline.contract_run.sequential_gates import zero_limit_qualifier


def run_qualifiers(status: str, sequential: Mapping[str, Any] | None) -> list[Qualifier]:
    """The qualifiers of a run report with `status` and its `sequential` section."""
    if status == "fail":
        return []
    found = [zero_limit_qualifier(sequential["gates"]) if sequential is not None else None]
    return [q for q in found if q is not None]
