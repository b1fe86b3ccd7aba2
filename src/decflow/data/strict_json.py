"""The JSON object hook of the dataset readers: a duplicate key is an error, not last-wins."""

from __future__ import annotations

from typing import Any


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` for `json.loads`; raises ValueError naming a repeated key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out
