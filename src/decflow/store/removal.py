"""Removing runs from a store: `decflow runs gc` (old runs, by rule) and `decflow runs rm RUN`
(one run), each with the stage folders only the removed runs used.

`gc` never removes an accepted run, a run a process holds (`running`), a run a remaining run
names (its `parent` or `noise_of`: the remaining run's `--resume`, its contract copy and its
stages need it; each such run is named in a note), or a stage folder a remaining run names;
a run is removed only when every given rule allows it (beyond the `keep` newest of its
decision, older than `older_than`), with the stage folders only it named (an interrupted
run names the folder of the calls it was making). A monitor's window runs count as the
monitor run that made them (kept or removed with it); the monitor's own state
(`monitors/`) is never touched, so its history outlives them. Call-cache packs
(`store.call_cache`)
belong to the run that wrote them and to every run whose results name them; `gc` removes a
pack with the last of those runs, and any pack none of them is left for. Other stage
folders no run names (the per-unit cache of check inputs) are left alone. Run folders
without a record (a run stopped before its first record) name no stage and are always
removed. A record that cannot be read, or names a place outside `stages/`, stops `gc`
before it removes anything (its stages cannot be told apart from others'); `runs rm`
removes such a run's folder alone.

`rm` removes a run nothing references: an accepted baseline, or a run another run continues
(`parent`) or measures the noise of (`noise_of`), needs `force` (the accepted entry goes
too); a run a process holds is never removed (the rm holds the run's lock while it works).

Every path removed is checked to be inside the store first (a symbolic link in the store
leading out of it is refused, and nothing is removed), and each one is named, in a dry run
too. A folder is removed whole or not at all, as readers see it (`remove_folder`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from decflow.errors import DecflowError
from decflow.store.call_cache import pack_folders_by_run
from decflow.store.locks import Lock
from decflow.store.runs import (
    RECORD,
    RUNNING,
    Listing,
    accepted_path,
    accepted_run,
    creation_order,
    is_accepted,
    is_one_name,
    list_runs,
    run_lock,
    run_path,
    run_state,
)
from decflow.store.store import TEMPORARY, DamagedArtifact, Store
from decflow.store.upkeep import run_folders

# Fields of a run record that name another run the record's run depends on.
REFERENCES = {"parent": "continues it", "noise_of": "measures its noise"}


@dataclass
class Removal:
    """What `gc` or `rm` removed (or would remove, in a dry run): run ids, store-relative
    stage folders, other entries (an accepted baseline's), and what was left and why."""

    runs: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    kept: int = 0
    notes: list[str] = field(default_factory=list)


def _age(record: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(record.get("updated_at") or record.get("created_at")))
    except ValueError:
        return None


def _counted_as(record: dict[str, Any]) -> str:
    """The run a record counts as for `--keep`: a monitor's window run goes with the
    monitor run that made it (kept or removed together), any other run is itself."""
    monitor_run = record.get("monitor_run")
    if record.get("kind") == "window" and isinstance(monitor_run, str):
        return monitor_run
    return str(record["run_id"])


def _removable(store: Store, records: list[dict[str, Any]], keep: int | None,
               older_than: timedelta | None) -> set[str]:
    now = datetime.now(UTC)
    newest: dict[str, list[str]] = {}
    for record in sorted(records, key=creation_order, reverse=True):
        if _counted_as(record) == record["run_id"]:
            newest.setdefault(str(record.get("decision")), []).append(record["run_id"])
    removable = set()
    for record in records:
        run_id = record["run_id"]
        if is_accepted(store, record) or run_state(store, record).status == RUNNING:
            continue
        kept = newest.get(str(record.get("decision")), [])[:keep or 0]
        if keep is not None and _counted_as(record) in kept:
            continue
        age = _age(record)
        if older_than is not None and (age is None or now - age < older_than):
            continue
        removable.add(run_id)
    return removable


def _folders_by_run(store: Store, listing: Listing) -> tuple[dict[str, set[str]],
                                                              list[DamagedArtifact]]:
    """The stage folders of every readable run, and the runs whose records cannot be read
    or name a place that is not a stage folder (folders without a record aside)."""
    folders, unreadable = {}, []
    for run_id, exc in listing.damaged.items():
        if run_id not in listing.unrecorded:
            unreadable.append(exc)
    for record in listing.records:
        try:
            folders[record["run_id"]] = run_folders(store, record)
        except DamagedArtifact as exc:
            unreadable.append(exc)
    for run_id, packs in pack_folders_by_run(store).items():
        if run_id in folders:  # a run keeps the call-cache packs it wrote
            folders[run_id] |= packs
    return folders, unreadable


def _orphan_packs(store: Store, folders: dict[str, set[str]]) -> list[str]:
    """Call-cache packs no run references any more (the runs that wrote or read them are
    gone)."""
    named = {folder for used in folders.values() for folder in used}
    return sorted({folder for packs in pack_folders_by_run(store).values() for folder in packs}
                  - named)


def _only_theirs(folders: dict[str, set[str]], removed: set[str]) -> list[str]:
    """The stage folders the `removed` runs name that no other run names."""
    theirs = {folder for run_id in removed for folder in folders.get(run_id, ())}
    others = {folder for run_id, named in folders.items() if run_id not in removed
              for folder in named}
    return sorted(theirs - others)


def collect_garbage(store: Store, *, keep: int | None, older_than: timedelta | None,
                    dry_run: bool = False) -> Removal:
    """Remove the runs the rules allow and the stage folders only they named."""
    if keep is None and older_than is None:
        raise DecflowError("runs gc: say what to remove: --keep N and/or --older-than AGE")
    listing = list_runs(store)
    folders, unreadable = _folders_by_run(store, listing)
    if unreadable:
        raise DecflowError(f"runs gc: {len(unreadable)} run record(s) cannot be read "
                           f"(first: {unreadable[0]}); nothing was removed, since their stages "
                           "cannot be told apart from others'")
    removed = _removable(store, listing.records, keep, older_than)
    referenced = _still_referenced(listing, removed)
    removed -= set(referenced)
    # folders of runs never recorded name no stage: they go whatever the rules say
    result = Removal(sorted(removed | listing.unrecorded),
                     sorted({*_only_theirs(folders, removed), *_orphan_packs(store, folders)}),
                     kept=len(listing.records) - len(removed),
                     notes=[f"kept run {run_id}: {why}" for run_id, why in referenced.items()])
    if not dry_run:
        _remove_all(store, [*(run_path(r) for r in result.runs), *result.stages], "runs gc")
    return result


def _still_referenced(listing: Listing, removable: set[str]) -> dict[str, str]:
    """The removable runs a run that stays names (its `parent`, or the run whose noise it
    measures), and why, through chains: a run continuing a kept run keeps that run, whose own
    parent then stays too (a kept run's `--resume` and contract copy live in its parent's
    folder)."""
    referenced: dict[str, str] = {}
    staying = [r for r in listing.records if r["run_id"] not in removable]
    while staying:
        found = [(record[name], f"run {record['run_id']} {why}") for record in staying
                 for name, why in REFERENCES.items()
                 if record.get(name) in removable and record[name] not in referenced]
        referenced.update(dict(reversed(found)))  # the first run that names it explains it
        staying = [r for r in listing.records if r["run_id"] in {run for run, _ in found}]
    return referenced


def _referrers(listing: Listing, run_id: str) -> list[str]:
    """`run Y (continues it)` for each run whose record names run `run_id`."""
    return [f"run {record['run_id']} ({why})" for record in listing.records
            for name, why in REFERENCES.items() if record.get(name) == run_id]


def remove_run(store: Store, run_id: str, *, force: bool = False,
               dry_run: bool = False) -> Removal:
    """Remove run `run_id` and the stage folders only it used (see module)."""
    listing = list_runs(store)
    records = {record["run_id"]: record for record in listing.records}
    if not is_one_name(run_id) or (run_id not in records and run_id not in listing.damaged):
        raise DecflowError(f"runs rm: no run '{run_id}' in the store {store.url} (see "
                           "`decflow runs`)")
    result = Removal([run_id])
    record = records.get(run_id)
    if record is not None:
        _check_unreferenced(store, listing, record, force, result)
    folders, unreadable = _folders_by_run(store, listing)
    if run_id not in folders:
        result.notes.append("its record cannot be read, so the stage folders it named are "
                            "left in place")
    elif unreadable:
        result.notes.append(f"its stage folders are left in place: {len(unreadable)} other "
                            "run record(s) cannot be read, so they may use them too")
    else:
        result.stages = _only_theirs(folders, {run_id})
    if dry_run:
        return result
    with run_lock(store, run_id):  # refused, naming the holder, while a process works on it
        if result.entries:
            assert record is not None
            _forget_accepted(store, record)
        _remove_all(store, [run_path(run_id), *result.stages], "runs rm")
    return result


def _check_unreferenced(store: Store, listing: Listing, record: dict[str, Any], force: bool,
                        result: Removal) -> None:
    """Refuse a run that is running, or (without `force`) accepted or used by another run;
    with `force`, note what the removal leaves dangling."""
    run_id = record["run_id"]
    state = run_state(store, record)
    if state.status == RUNNING:
        raise DecflowError(f"runs rm: run {run_id} is running ({state.detail}); stop it first")
    users = _referrers(listing, run_id)
    if users and not force:
        raise DecflowError(f"runs rm: run {run_id} is used by {', '.join(users)}; remove "
                           f"{'that run' if len(users) == 1 else 'those runs'} first, or "
                           f"pass --force to remove it anyway")
    if users:
        result.notes.append(f"{', '.join(users)} named it and will no longer find it")
    if is_accepted(store, record):
        decision, backend = str(record.get("decision")), str(record.get("backend"))
        if not force:
            raise DecflowError(f"runs rm: run {run_id} is the accepted baseline of {decision} "
                               f"(backend {backend}); accept another run first, or pass "
                               "--force to remove it and its accepted entry")
        result.entries.append(accepted_path(decision, backend))
        result.notes.append(f"{decision} (backend {backend}) has no accepted baseline any "
                            "more: accept another run")


def _forget_accepted(store: Store, record: dict[str, Any]) -> None:
    """Remove the accepted entry of a decision and backend if it still names the run."""
    decision, backend = str(record.get("decision")), str(record.get("backend"))
    with Lock(store, f"accepted/{decision}", f"the accepted baselines of '{decision}'",
              wait_s=30.0):
        if accepted_run(store, decision, backend) == record["run_id"]:
            store.discard(accepted_path(decision, backend))


def _remove_all(store: Store, targets: Iterable[str], command: str) -> None:
    """Remove every target, once each was found to be inside the store."""
    listed = list(targets)
    for relative in listed:
        _check_inside(store, relative, command)
    for relative in listed:
        remove_folder(store, relative, command)


def _check_inside(store: Store, relative: str, command: str) -> None:
    """On a local store, `relative` must resolve inside the store's folder: a symbolic link
    in the store leading elsewhere is refused before anything is removed."""
    if not store.is_local:
        return  # object stores have no links; `Store.path` keeps keys inside the store
    root = os.path.realpath(store.root)
    where = os.path.realpath(os.path.dirname(store.path(relative)))
    if os.path.commonpath([root, where]) != root:
        raise DecflowError(f"{command}: {store.uri(relative)} is not inside the store: "
                           f"{store.uri(os.path.dirname(relative))} leads to {where} (a "
                           "symbolic link); nothing was removed: remove that link")


def remove_folder(store: Store, relative: str, command: str) -> None:
    """Remove a run or stage folder so that no reader ever sees part of it: a local one is
    first renamed to a temporary name (hidden from listings; a rename is atomic), then
    deleted (a symbolic link itself, never what it leads to); on an object store, where
    folders cannot be renamed, a run's record goes first, so a removal cut short leaves an
    unrecorded folder the next `gc` removes. A folder not inside the store is refused."""
    _check_inside(store, relative, command)
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
        raise DecflowError(f"{command}: cannot remove {store.uri(relative)} "
                           f"({exc.strerror or exc})") from None
    if store.is_local:
        try:
            if os.path.islink(doomed):
                os.unlink(doomed)
            else:
                shutil.rmtree(doomed)
        except OSError as exc:
            raise DecflowError(f"{command}: {store.uri(relative)} is removed from the store, "
                               f"but its files are left in {doomed} ({exc.strerror or exc}); "
                               "delete that folder") from None


def parse_age(text: str) -> timedelta:
    """`30d`, `12h`, `90m` → a duration (for `--older-than`)."""
    units = {"d": "days", "h": "hours", "m": "minutes"}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit():
        raise DecflowError(f"--older-than: '{text}' is not an age such as 30d, 12h or 90m")
    return timedelta(**{units[unit]: int(number)})
