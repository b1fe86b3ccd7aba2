"""Where the call cache lives in the store, and what references its entries.

Answers are stored in *packs*: `stages/calls/<key>/part-00000.parquet` plus its
`_manifest.json`, one pack per run whose backend answered with the cache writing. A
pack's rows are entries keyed by their call key (`decflow.backends.call_keys`); its
manifest's `extra` names the run that wrote it (`run`), when (`written_at`, so the newest
answer wins after `--call-cache refresh`) and the identity digest of the model that gave
the answers (`identity`: a run reads only the packs of the model it asks). A pack is an
artifact like the others: hashed, verified when read, named by the runs that wrote or read
it (their results manifest lists it), and removed by `runs gc` / `runs rm` with the last
run that references it (`pack_folders_by_run`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from decflow.store.store import DamagedArtifact, Manifest, Store

CALLS = "calls"
log = logging.getLogger("decflow")


def pack_manifests(store: Store) -> list[Manifest]:
    """Every published pack (one being written has no manifest yet); a damaged manifest is
    skipped with a warning: its answers are asked again."""
    found = []
    for key in store.list_dir(f"stages/{CALLS}"):
        try:
            manifest = store.manifest(CALLS, key)
        except DamagedArtifact as exc:
            log.warning("call cache: skipping a damaged pack (%s)", exc)
            continue
        if manifest is not None:
            found.append(manifest)
    return found


def pack_folders_by_run(store: Store) -> dict[str, set[str]]:
    """The folders of the packs each run wrote (a run references what it wrote, even before
    its results name them: an interrupted run may still be resumed)."""
    folders: dict[str, set[str]] = {}
    for manifest in pack_manifests(store):
        writer = manifest.extra.get("run")
        folders.setdefault(str(writer), set()).add(store.stage_prefix(CALLS, manifest.key))
    return folders


@dataclass(frozen=True)
class CacheUsage:
    """The size of a store's call cache."""

    packs: int
    entries: int
    bytes: int

    def line(self, location: str) -> str:
        """`call cache: 1,204 answers in 3 packs (1.2 MB) in <store>`."""
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 100_000 else f"{self.bytes:,} bytes"
        return (f"call cache: {self.entries:,} answers in {self.packs:,} "
                f"pack{'s' if self.packs != 1 else ''} ({size}) in {location}")


def cache_usage(store: Store) -> CacheUsage:
    """How many packs and entries the cache holds and the bytes of their files."""
    packs = pack_manifests(store)
    size = 0
    for manifest in packs:
        prefix = store.stage_prefix(CALLS, manifest.key)
        size += store.size(f"{prefix}/_manifest.json")
        size += sum(store.size(part.path) for part in manifest.parts)
    return CacheUsage(len(packs), sum(m.rows for m in packs), size)
