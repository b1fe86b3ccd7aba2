"""Installed third-party code is only ever found through entry points."""

from __future__ import annotations


def entry_point_names(group: str, *, exclude: tuple[str, ...] = ()) -> set[str]:
    """Names registered in `group`; built-in names in `exclude` can never be shadowed."""
    # imported here: importlib.metadata (with email, zipfile, csv) is ~40 M instructions,
    # and only a contract naming a provider or paraphraser that is not built in reads this
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group=group)} - set(exclude)
