"""Looking after a store: `decflow runs verify` re-hashes runs' artifacts against what their
records name, `decflow runs gc` removes old runs and the stage artifacts no remaining run
uses.

A run's artifacts are the stage manifests its record names (`stages`, and manifests named
inside them, such as a requests stage's persona pairs): each stage folder must still hold a
`_manifest.json` with the recorded sha256, and every part must hash as recorded.

`gc` never removes an accepted run, a run a process holds (`running`), or a stage folder a
remaining run names; a run is removed only when every given rule allows it (beyond the
`keep` newest of its decision, older than `older_than`), with the stage folders only it
named (an interrupted run names the folder of the calls it was making). Stage folders no
run names (the per-unit cache of check inputs) are left alone. Run folders without a record
(a run stopped before its first record) name no stage and are always removed. A folder is
removed whole or not at all, as readers see it (`_remove`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from decflow.errors import DecflowError
from decflow.store.run_files import recorded as recorded_files
from decflow.store.runs import (
    FINISHED,
    RECORD,
    REPORT,
    RUNNING,
    damaged_files,
    is_accepted,
    list_runs,
    read_run_record,
    run_path,
    run_state,
    unrecorded_run,
)
from decflow.store.store import MANIFEST, TEMPORARY, DamagedArtifact, Manifest, Store


@dataclass(frozen=True)
class Damage:
    path: str  # where (a URI)
    problem: str


def run_manifests(record: dict[str, Any]) -> Iterator[Manifest]:
    """Every stage manifest a run record names, nested ones included."""

    def walk(value: Any) -> Iterator[Manifest]:
        if isinstance(value, dict):
            if {"stage", "key", "parts", "sha256"} <= value.keys():
                yield Manifest.from_dict(value)
            for inner in value.values():
                yield from walk(inner)
        elif isinstance(value, list):
            for inner in value:
                yield from walk(inner)

    yield from walk(record.get("stages") or {})


def run_folders(store: Store, record: dict[str, Any]) -> set[str]:
    """The stage folders a run uses: those of its manifests, and the one it was computing
    when it last recorded itself (an interrupted run's call results)."""
    folders = {store.stage_prefix(m.stage, m.key) for m in run_manifests(record)}
    computing = record.get("computing")
    if isinstance(computing, dict) and {"stage", "key"} <= computing.keys():
        folders.add(store.stage_prefix(str(computing["stage"]), str(computing["key"])))
    return folders


def _stage_damage(store: Store, manifest: Manifest) -> list[Damage]:
    prefix = store.stage_prefix(manifest.stage, manifest.key)
    found: list[Damage] = []
    try:
        published = store.manifest(manifest.stage, manifest.key)
        if published is None:
            found.append(Damage(store.uri(f"{prefix}/{MANIFEST}"), "is missing"))
        elif published.sha256 != manifest.sha256:
            found.append(Damage(store.uri(f"{prefix}/{MANIFEST}"),
                                "names other parts than the run recorded (published again)"))
    except DamagedArtifact as exc:
        found.append(Damage(exc.uri, exc.problem))
    for part in manifest.parts:
        try:  # part by part: each damaged one is named
            store.verify(replace(manifest, parts=(part,)))
        except DamagedArtifact as exc:
            found.append(Damage(exc.uri, exc.problem))
    return found


def verify_run(store: Store, run_id: str) -> tuple[int, list[Damage]]:
    """(files checked, what is damaged) of run `run_id`."""
    leftover = unrecorded_run(store, run_id)
    if leftover is not None:
        return 1, [Damage(leftover.uri, leftover.problem)]
    try:
        record = read_run_record(store, run_id)
    except DamagedArtifact as exc:
        return 1, [Damage(exc.uri, exc.problem)]
    checked, damage = 1, []
    for manifest in run_manifests(record):
        checked += 1 + len(manifest.parts)
        damage += _stage_damage(store, manifest)
    if record.get("status") in FINISHED:
        checked += 1
        try:
            store.read_json(run_path(run_id, REPORT))
        except DamagedArtifact as exc:
            damage.append(Damage(exc.uri, exc.problem))
    recorded = damaged_files(store, record)  # report and views against their sha256
    checked += len(recorded_files(record))
    damage += [Damage(store.uri(run_path(run_id, name)), "does not match the sha256 recorded "
                      "for it in run.json (edited or damaged since the run)")
               for name in recorded]
    return checked, damage


@dataclass
class Collection:
    """What `gc` removed (or would remove, in a dry run)."""

    runs: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)  # store-relative folders
    kept: int = 0


def _age(record: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(record.get("updated_at") or record.get("created_at")))
    except ValueError:
        return None


def _removable(store: Store, records: list[dict[str, Any]], keep: int | None,
               older_than: timedelta | None) -> set[str]:
    now = datetime.now(UTC)
    newest: dict[str, list[str]] = {}
    for record in sorted(records, key=lambda r: r["run_id"], reverse=True):
        newest.setdefault(str(record.get("decision")), []).append(record["run_id"])
    removable = set()
    for record in records:
        run_id = record["run_id"]
        if is_accepted(store, record) or run_state(store, record).status == RUNNING:
            continue
        if keep is not None and run_id in newest[str(record.get("decision"))][:keep]:
            continue
        age = _age(record)
        if older_than is not None and (age is None or now - age < older_than):
            continue
        removable.add(run_id)
    return removable


def collect_garbage(store: Store, *, keep: int | None, older_than: timedelta | None,
                    dry_run: bool = False) -> Collection:
    """Remove the runs the rules allow and the stage folders only they named."""
    if keep is None and older_than is None:
        raise DecflowError("runs gc: say what to remove: --keep N and/or --older-than AGE")
    listing = list_runs(store)
    unreadable = [exc for run_id, exc in listing.damaged.items()
                  if run_id not in listing.unrecorded]
    if unreadable:
        raise DecflowError(f"runs gc: {len(unreadable)} run record(s) cannot be read "
                           f"(first: {unreadable[0]}); nothing was removed, since their stages "
                           "cannot be told apart from others'")
    removed = _removable(store, listing.records, keep, older_than)
    folders = {folder for r in listing.records for folder in run_folders(store, r)}
    kept_folders = {folder for r in listing.records if r["run_id"] not in removed
                    for folder in run_folders(store, r)}
    stale = sorted(folders - kept_folders)
    # folders of runs never recorded name no stage: they go whatever the rules say
    result = Collection(sorted(removed | listing.unrecorded), stale,
                        len(listing.records) - len(removed))
    if dry_run:
        return result
    for relative in [*(run_path(r) for r in result.runs), *stale]:
        _remove(store, relative)
    return result


def _remove(store: Store, relative: str) -> None:
    """Remove a run or stage folder so that no reader ever sees part of it: a local one is
    first renamed to a temporary name (hidden from listings; a rename is atomic), then
    deleted; on an object store, where folders cannot be renamed, a run's record goes first,
    so a removal cut short leaves an unrecorded folder the next `gc` removes."""
    path = store.path(relative)
    parent, name = path.rsplit("/", 1)
    doomed = f"{parent}/{TEMPORARY}gc-{name}"
    try:
        if store.is_local:
            os.rename(path, doomed)
        else:
            with contextlib.suppress(FileNotFoundError):
                store.fs.rm(store.path(f"{relative}/{RECORD}"))
            store.fs.rm(path, recursive=True)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DecflowError(f"runs gc: cannot remove {store.uri(relative)} "
                           f"({exc.strerror or exc})") from None
    if store.is_local:
        try:
            shutil.rmtree(doomed)
        except OSError as exc:
            raise DecflowError(f"runs gc: {store.uri(relative)} is removed from the store, but "
                               f"its files are left in {doomed} ({exc.strerror or exc}); "
                               "delete that folder") from None


def parse_age(text: str) -> timedelta:
    """`30d`, `12h`, `90m` → a duration (for `--older-than`)."""
    units = {"d": "days", "h": "hours", "m": "minutes"}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit():
        raise DecflowError(f"--older-than: '{text}' is not an age such as 30d, 12h or 90m")
    return timedelta(**{units[unit]: int(number)})
