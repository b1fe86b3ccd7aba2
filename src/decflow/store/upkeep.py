"""Looking after a store: `decflow runs verify` re-hashes runs' artifacts against what their
records name; which stage folders a run uses (`run_folders`, for `runs gc` and `runs rm`).

A run's artifacts are the stage manifests its record names (`stages`, and manifests named
inside them, such as a requests stage's persona pairs): each stage folder must still hold a
`_manifest.json` with the recorded sha256, and every part must hash as recorded. A record is
data a stranger may have edited: a manifest whose stage, key or part path is not one name
inside `stages/<stage>/<key>/` (`../../elsewhere`) makes the record damaged, never a path
that is read or removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from decflow.store.run_files import recorded as recorded_files
from decflow.store.runs import (
    FINISHED,
    RECORD,
    REPORT,
    damaged_files,
    is_one_name,
    read_run_record,
    run_path,
    unrecorded_run,
)
from decflow.store.store import MANIFEST, DamagedArtifact, Manifest, Store


@dataclass(frozen=True)
class Damage:
    path: str  # where (a URI)
    problem: str


def run_manifests(store: Store, record: dict[str, Any]) -> Iterator[Manifest]:
    """Every stage manifest a run record names, nested ones included; `DamagedArtifact`
    (naming the record) for one that is not a manifest of a folder inside `stages/`."""

    def walk(value: Any) -> Iterator[Manifest]:
        if isinstance(value, dict):
            if {"stage", "key", "parts", "sha256"} <= value.keys():
                yield _checked_manifest(store, record, value)
            for inner in value.values():
                yield from walk(inner)
        elif isinstance(value, list):
            for inner in value:
                yield from walk(inner)

    yield from walk(record.get("stages") or {})


def _damaged_record(store: Store, record: dict[str, Any], problem: str) -> DamagedArtifact:
    run_id = str(record.get("run_id"))
    return DamagedArtifact(store.uri(run_path(run_id, RECORD)), f"is damaged: {problem}",
                           f"nothing it names is touched; remove the run with `decflow runs "
                           f"rm {run_id}`")


def _checked_manifest(store: Store, record: dict[str, Any], entry: dict[str, Any]) -> Manifest:
    try:
        manifest = Manifest.from_dict(entry)
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        raise _damaged_record(store, record, f"a stage entry is not a manifest "
                              f"({type(exc).__name__}: {exc})") from None
    if not (is_one_name(manifest.stage) and is_one_name(manifest.key)):
        raise _damaged_record(store, record, f"stage entry '{manifest.stage}' (key "
                              f"'{manifest.key}') does not name a folder of the store")
    folder = f"{store.stage_prefix(manifest.stage, manifest.key)}/"
    for part in manifest.parts:
        if not (part.path.startswith(folder) and is_one_name(part.path[len(folder):])):
            raise _damaged_record(store, record, f"stage '{manifest.stage}' names the part "
                                  f"'{part.path}', which is not a file of its folder {folder}")
    return manifest


def run_folders(store: Store, record: dict[str, Any]) -> set[str]:
    """The stage folders a run uses: those of its manifests, and the one it was computing
    when it last recorded itself (an interrupted run's call results); `DamagedArtifact`
    when the record names a place that is not a stage folder."""
    folders = {store.stage_prefix(m.stage, m.key) for m in run_manifests(store, record)}
    computing = record.get("computing")
    if isinstance(computing, dict) and {"stage", "key"} <= computing.keys():
        stage, key = computing["stage"], computing["key"]
        if not (is_one_name(stage) and is_one_name(key)):
            raise _damaged_record(store, record, f"'computing' names stage '{stage}' (key "
                                  f"'{key}'), which is not a folder of the store")
        folders.add(store.stage_prefix(stage, key))
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
    try:
        manifests = list(run_manifests(store, record))
    except DamagedArtifact as exc:
        return checked, [Damage(exc.uri, exc.problem)]
    for manifest in manifests:
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
               if is_one_name(name) else
               Damage(store.uri(run_path(run_id, RECORD)), f"is damaged: it names the file "
                      f"'{name}', which is not a file of the run's folder")
               for name in recorded]
    return checked, damage
