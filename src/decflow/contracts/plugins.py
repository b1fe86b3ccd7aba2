"""Installed third-party code is only ever found through entry points."""

from __future__ import annotations

from importlib.metadata import entry_points


def entry_point_names(group: str, *, exclude: tuple[str, ...] = ()) -> set[str]:
    """Names registered in `group`; built-in names in `exclude` can never be shadowed."""
    return {ep.name for ep in entry_points(group=group)} - set(exclude)
