"""Comparing reports: ours with DecGuard's (the same structure, floats equal to 1e-9
relative), and two runs of the same inputs (`normalized`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any


def close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def normalized(report: dict[str, Any], run_keyed_stages: Iterable[str]) -> dict[str, Any]:
    """A report without what differs between two runs of the same inputs: run id, time,
    rounding seed, the artifacts of `run_keyed_stages` (their keys include the run),
    measured latency. (Shares that are neither 0 nor 1 round differently under two seeds:
    give both runs the same `RunSpec.rounding_seed` to compare their evidence.)"""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            if str(value.get("metric", "")).startswith("latency"):
                value = {**value, "value": None, "message": None}
            return {k: strip(v) for k, v in value.items() if "latency" not in k}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    copy = json.loads(json.dumps(report))
    copy.pop("created_at", None)
    copy.pop("rounding_seed", None)  # drawn per run, like its id
    run = copy.get("run") or {}
    run.pop("id", None)
    for stage in run_keyed_stages:
        (run.get("artifacts") or {}).pop(stage, None)
    return strip(copy)
