"""The call cache of a contract run: stored backend answers served instead of new calls,
only when asked for (`--call-cache`, `DECFLOW_CALL_CACHE`, `evaluation.call_cache`).

Modes: `off` (the default: every run asks the backend), `read-write` (serve what is stored,
store what is asked), `read-only` (serve, never store), `refresh` (ask everything again and
store the new answers, which later runs then serve). The mode is fixed when a run starts
and kept with it (`RunSpec.call_cache`, shown by `runs show`; `--resume` keeps it).
Verdicts that need fresh answers never read the cache: the noise runs of `--noise-reruns`
(their specs leave it off) and a nightly's candidate run (`fresh_answers_mode`).

Before the first call of a run with the cache on, the backend is asked which model answers
(`Backend.model_identity`); the identity is stored with the run (`runs/<id>/call-identity.json`)
so that every shard, in any process, keys its requests alike (`decflow.backends.call_keys`).
A shard then serves the requests whose key has an entry (each row marked with the entry's
pack in `cache_entry`) and sends the rest. Once every request has a result, the answers
the backend gave are stored as one pack (`decflow.store.call_cache`), taken from the
run's recorded results: those of an interrupted attempt (its chunks, its journals the
resume recovered) were paid for as much as the resume's own. Errors are never stored. The
run's results manifest names the packs it wrote and read, which keeps them from `runs gc`
while the run exists.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from decflow import interrupts
from decflow.backends.base import Backend, DecisionRequest, DecisionSpec
from decflow.backends.call_keys import call_key, identity_digest
from decflow.backends.engine import _rows_from_matrix
from decflow.data.golden_dataset import case_input
from decflow.errors import DecflowError
from decflow.pipeline.contract_run.backend_plan import plan_requests
from decflow.pipeline.contract_run.cache_mode import call_cache_mode as call_cache_mode
from decflow.pipeline.contract_run.calls import ORIGINAL_ERROR
from decflow.store.call_cache import CALLS, pack_manifests
from decflow.store.runs import run_path
from decflow.store.store import Manifest, Part, Store

if TYPE_CHECKING:
    from decflow.contracts.contract import Contract
    from decflow.pipeline.spec import RunSpec

IDENTITY = "call-identity.json"
ENTRY_COLUMNS = ("entry_key", "probabilities", "latency_ms", "model", "model_version",
                 "metadata_json")


def reads(mode: str) -> bool:
    return mode in ("read-write", "read-only")


def writes(mode: str) -> bool:
    return mode in ("read-write", "refresh")


def fresh_answers_mode(mode: str) -> str:
    """The mode of a run whose verdict needs the model as it answers now (a nightly's
    candidate): it never reads the cache, and stores its answers when the cache writes."""
    return "refresh" if writes(mode) else "off"


def identity_path(run_id: str) -> str:
    return run_path(run_id, IDENTITY)


async def record_identity(backend: Backend, store: Store, run_id: str) -> dict[str, Any]:
    """Ask the backend which model answers, and store the run's identity (every shard keys
    its requests with it)."""
    served = await backend.model_identity()
    identity = {
        "backend": backend.call_identity(),
        "format": backend.cache_format,
        **served.to_dict(),
    }
    identity["digest"] = identity_digest(identity["backend"], served.reported,
                                         backend.cache_format)
    store.write_json(identity_path(run_id), identity)
    return identity


def stored_identity(store: Store, run_id: str) -> dict[str, Any] | None:
    relative = identity_path(run_id)
    return store.read_json(relative) if store.exists(relative) else None


def _now() -> str:
    return datetime.now(UTC).isoformat()


# The cache of the run this process calls for (its shards share the entries read once).
_OPEN: dict[tuple[str, str], CallCache] = {}
_OPENING = threading.Lock()


class CallCache:
    """One process's use of the cache for one run: the keys of its requests, the stored
    entries of the model it asks (read once, on the first lookup) and the answers to store."""

    def __init__(self, store: Store, run_id: str, mode: str, identity: dict[str, Any]) -> None:
        self.store, self.run_id, self.mode = store, run_id, mode
        self.identity = identity
        self.digest: str = identity["digest"]
        self._index: pl.DataFrame | None = None
        self._indexing = threading.Lock()

    @classmethod
    def for_run(cls, spec: RunSpec, store: Store) -> CallCache | None:
        """The run's cache (shared by the shards this process runs), None when it is off."""
        if spec.call_cache == "off":
            return None
        with _OPENING:
            found = _OPEN.get((store.location, spec.run_id))
            if found is None:
                identity = stored_identity(store, spec.run_id)
                if identity is None:
                    raise DecflowError(
                        f"run {spec.run_id}: the call cache is on but the run stored no model "
                        f"identity ({store.uri(identity_path(spec.run_id))}); finish it with "
                        f"--resume {spec.run_id}")
                found = cls(store, spec.run_id, spec.call_cache, identity)
                _OPEN.clear()  # one run's entries at a time in a process
                _OPEN[(store.location, spec.run_id)] = found
        return found

    # -- keys -------------------------------------------------------------------------------

    def keys(self, backend: Backend, requests: pl.DataFrame, decision: DecisionSpec
             ) -> list[str]:
        """The call key of every request (rows of the requests table)."""
        keys = []
        for request_id, text, obj, shown in zip(
                requests["request_id"], requests["input_text"], requests["input_json"],
                requests["shown_labels"], strict=True):
            spec = DecisionSpec(decision.name, decision.type, tuple(shown),
                                decision.description)
            sent = backend.request_sent(DecisionRequest(request_id, spec, case_input(text, obj)))
            keys.append(call_key(self.digest, sent, request_id))
        return keys

    # -- serving ----------------------------------------------------------------------------

    def _entries(self) -> pl.DataFrame:
        """Every stored entry of this run's model identity, the newest answer of a key."""
        with self._indexing:
            if self._index is None:
                frames = []
                for manifest in pack_manifests(self.store):
                    if manifest.extra.get("identity") != self.digest:
                        continue
                    interrupts.check()
                    frames.append(self.store.read(manifest, list(ENTRY_COLUMNS)).with_columns(
                        pack=pl.lit(manifest.key),
                        written_at=pl.lit(str(manifest.extra.get("written_at", "")))))
                index = pl.concat(frames) if frames else pl.DataFrame(schema={
                    "entry_key": pl.String, "probabilities": pl.List(pl.Float64),
                    "latency_ms": pl.Float64, "model": pl.String, "model_version": pl.String,
                    "metadata_json": pl.String, "pack": pl.String, "written_at": pl.String})
                self._index = index.sort("written_at", "pack", descending=True).unique(
                    "entry_key", keep="first")
            return self._index

    def served(self, requests: pl.DataFrame, keys: Sequence[str],
               labels: Sequence[str]) -> pl.DataFrame:
        """Result rows (canonical label order) for the requests the cache has answers for,
        each marked with the pack it came from; none when the mode does not read."""
        if not reads(self.mode) or not len(keys):
            return pl.DataFrame()
        asked = pl.DataFrame({"request_id": requests["request_id"],
                              "entry_key": pl.Series(keys, dtype=pl.String),
                              "label_order": requests["label_order"]})
        hits = asked.join(self._entries(), on="entry_key", how="inner", maintain_order="left")
        if not hits.height:
            return pl.DataFrame()
        import numpy as np  # only once the cache holds answers (`backends/engine.py`)

        from decflow.metrics.columns import probability_matrix

        width = len(labels)
        shown = probability_matrix(hits["probabilities"], width)
        order = np.asarray(hits["label_order"].list.to_array(width).to_numpy(), dtype=np.int64)
        canonical = np.empty_like(shown)
        canonical[np.arange(hits.height)[:, None], order] = shown
        n = hits.height
        return _rows_from_matrix(
            hits["request_id"], canonical, labels, hits["latency_ms"].to_list(), [None] * n,
            [None] * n, hits["model"].to_list(), hits["model_version"].to_list(),
            hits["metadata_json"].to_list(), hits["pack"].to_list())

    # -- storing ----------------------------------------------------------------------------

    def store_answers(self, backend: Backend, decision: DecisionSpec, requests: pl.DataFrame,
              answers: pl.DataFrame) -> None:
        """Store `answers` (result rows, canonical label order, of `requests`: rows of the
        requests table) as one pack, but those whose key a pack of this run already holds
        (a finish retried after storing)."""
        keys = pl.Series("entry_key", self.keys(backend, requests, decision), dtype=pl.String)
        asked = pl.DataFrame({"request_id": requests["request_id"], "entry_key": keys,
                              "label_order": requests["label_order"]})
        rows = answers.join(asked, on="request_id", how="inner").join(
            self._stored_by_run(), on="entry_key", how="anti")
        if not rows.height:
            return
        import numpy as np  # only once answers are stored (`backends/engine.py`)

        from decflow.metrics.columns import probability_matrix

        width = len(decision.labels)
        canonical = probability_matrix(rows["probabilities"], width)
        order = np.asarray(rows["label_order"].list.to_array(width).to_numpy(), dtype=np.int64)
        shown = np.take_along_axis(canonical, order, axis=1)
        pack = pl.DataFrame({
            "entry_key": rows["entry_key"],
            "probabilities": pl.Series(shown).cast(pl.List(pl.Float64)),
            "latency_ms": rows["latency_ms"], "model": rows["model"],
            "model_version": rows["model_version"], "metadata_json": rows["metadata_json"],
        })
        digest = hashlib.sha256("\n".join(sorted(pack["entry_key"].to_list())).encode())
        digest.update(f"\n{self.run_id}\n{uuid.uuid4().hex}".encode())
        self.store.publish(CALLS, digest.hexdigest(), pack, extra={
            "run": self.run_id, "identity": self.digest, "written_at": _now()})

    def _stored_by_run(self) -> pl.DataFrame:
        """The keys of the entries this run stored already."""
        frames = [self.store.read(manifest, ["entry_key"])
                  for manifest in pack_manifests(self.store)
                  if manifest.extra.get("run") == self.run_id]
        return pl.concat(frames) if frames else pl.DataFrame(schema={"entry_key": pl.String})


# What storing needs of a result row and of its request (`store_recorded`).
ANSWER_COLUMNS = ["request_id", "probabilities", "latency_ms", "model", "model_version",
                  "metadata_json", "error_kind", "cache_entry"]
KEY_COLUMNS = ["request_id", "input_text", "input_json", "shown_labels", "label_order"]


def store_recorded(spec: RunSpec, store: Store, backend: Backend, decision: DecisionSpec,
                   requests: Manifest, parts: Sequence[Part]) -> None:
    """Store the answers the backend gave the run (its recorded results `parts`, whichever
    attempt recorded them: an interrupted one's chunks and journals too), errors and
    answers the cache served left out; nothing when the mode does not write."""
    if not writes(spec.call_cache):
        return
    frames = [store.read_part(part, ANSWER_COLUMNS).filter(
        pl.col("error_kind").is_null() & pl.col("cache_entry").is_null()) for part in parts]
    answers = pl.concat(frames) if frames else pl.DataFrame()
    if not answers.height:
        return
    asked = store.read(requests, KEY_COLUMNS).join(answers.select("request_id"),
                                                   on="request_id", how="semi")
    cache = CallCache.for_run(spec, store)
    if cache is not None:
        cache.store_answers(backend, decision, asked, answers.drop("error_kind", "cache_entry"))


def cache_record(store: Store, spec: RunSpec, parts: Sequence[Any]) -> dict[str, Any] | None:
    """What the results manifest keeps of the run's cache: its mode, the model identity, and
    the packs it wrote or served answers from (so they stay while the run exists)."""
    if spec.call_cache == "off":
        return None
    read: set[str] = set()
    for part in parts:
        served = store.read_part(part, ["cache_entry"])["cache_entry"].drop_nulls()
        read.update(served.unique().to_list())
    packs: list[Manifest] = [m for m in pack_manifests(store)
                             if m.extra.get("run") == spec.run_id or m.key in read]
    return {"mode": spec.call_cache, "identity": stored_identity(store, spec.run_id),
            "packs": [m.to_dict() for m in sorted(packs, key=lambda m: m.key)]}


def call_counts(store: Store, results: Manifest, requests: Manifest) -> dict[str, Any]:
    """Requests the backend was sent, answers served from the cache and the backend
    seconds those answers took when they were first asked (their recorded latency)."""
    answers = store.read(results, ["request_id", "error_kind", "cache_entry", "latency_ms"])
    unsent = store.read(requests, ["request_id", "pre_error_kind"]).filter(
        pl.col("pre_error_kind").is_not_null()).height
    served = answers.filter(pl.col("cache_entry").is_not_null())
    blocked = answers.filter(pl.col("error_kind") == ORIGINAL_ERROR).height
    seconds = float(served["latency_ms"].fill_null(0.0).sum()) / 1000.0
    return {"sent": answers.height - served.height - blocked - unsent,
            "served": served.height, "seconds": float(seconds)}


def cache_section(contract: Contract, spec: RunSpec, store: Store,
                  manifests: dict[str, Manifest]) -> dict[str, Any] | None:
    """The report's `call_cache` section (None when the run did not use the cache)."""
    results = manifests["results"]
    record = results.extra.get("call_cache")
    if record is None:
        return None
    counts = call_counts(store, results, manifests["requests"])
    # the plan's probes were sent to the model too, cached answers or not
    sent = counts["sent"] + plan_requests(store, spec.run_id)
    price = contract.backend_config(spec.backend).price_per_call
    identity = record.get("identity") or {}
    return {
        "mode": record["mode"],
        "requests_sent": sent,
        "served_from_cache": counts["served"],
        "backend_seconds_saved": round(counts["seconds"], 3),
        "price_per_call": price,
        "money_saved": None if price is None else round(price * counts["served"], 6),
        "model_identity": {"verified": bool(identity.get("verified")),
                           "note": identity.get("note", ""),
                           "reported": identity.get("reported", {})},
    }
