"""`decflow.probe`: agentverity's measure-first workflow on a plain agent callable.

    import decflow
    result = decflow.probe(agent, ["hello", "a secret", "world", "foo"])
    print(result.summary())

The package is itself callable (`decflow.probe(...)` calls `probe`), because the function
and the package share the name `decflow.probe`: whichever one an import leaves behind on
`decflow`, the call works, and `decflow.probe.Relation` stays reachable.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from decflow.probe.observation import Observation, observe
from decflow.probe.relations import Relation, RelationResult, builtin_relations, ordered, same_on
from decflow.probe.result import ProbeResult
from decflow.probe.runner import probe
from decflow.probe.storage import load

__all__ = [
    "Observation",
    "ProbeResult",
    "Relation",
    "RelationResult",
    "builtin_relations",
    "load",
    "observe",
    "ordered",
    "probe",
    "same_on",
]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> ProbeResult:
        return probe(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
