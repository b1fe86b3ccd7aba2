"""Monitors in the store: where a monitor's state and the statistics it keeps live.

Layout (the only module that spells it):

    monitors/<monitor_id>/state.json           the monitor's state, rewritten whole and
                                               last by each run that changes it
    monitors/<monitor_id>/pieces/<key>.stats.parquet        one partition's statistics per
                                               window and group (its records' sufficient
                                               statistics: never a record)
    monitors/<monitor_id>/pieces/<key>.predictions.parquet  its compact predictions: id
                                               hash, window, selected label, top confidence,
                                               inline correctness, segment tokens
    monitors/<monitor_id>/labels/<key>.parquet one labels partition: id hash, outcome,
                                               arrival timestamp, arrival order
    monitors/<monitor_id>/lock                 held while a run of the monitor works

A monitor is one decision, backend and source (`monitor_id`); its window runs and monitor
runs are ordinary runs (`runs/<run_id>/`, `store.runs`) that name it. Pieces are written
before the state that names them, and the state atomically, so a run killed at any point
leaves the previous state whole; pieces no state names are removed by the next run that
commits one (`unnamed_pieces`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from decflow.store.locks import Lock
from decflow.store.store import Store

MONITORS = "monitors"
STATE = "state.json"
PIECES = "pieces"
LABELS = "labels"
STATS_SUFFIX = ".stats.parquet"
PREDICTIONS_SUFFIX = ".predictions.parquet"
LOCK_WAIT_S = 5.0


def monitor_id(decision: str, backend: str, source: str) -> str:
    """`<decision>-<12 hex digits>`: the decision (as a readable prefix) and the digest of
    decision, backend and source."""
    digest = hashlib.sha256("\n".join((decision, backend, source)).encode()).hexdigest()
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", decision).strip("-")[:40] or "monitor"
    return f"{readable}-{digest[:12]}"


def monitor_path(monitor: str, name: str = "") -> str:
    return f"{MONITORS}/{monitor}/{name}" if name else f"{MONITORS}/{monitor}"


def state_path(monitor: str) -> str:
    return monitor_path(monitor, STATE)


def read_state(store: Store, monitor: str) -> dict[str, Any] | None:
    """The monitor's stored state, or None before its first run."""
    relative = state_path(monitor)
    if not store.exists(relative):
        return None
    state: dict[str, Any] = store.read_json(relative)
    return state


def write_state(store: Store, monitor: str, state: dict[str, Any]) -> None:
    store.write_json(state_path(monitor), state)


def piece_paths(monitor: str, key: str) -> tuple[str, str]:
    """(statistics, predictions) of a partition's piece."""
    base = monitor_path(monitor, f"{PIECES}/{key}")
    return base + STATS_SUFFIX, base + PREDICTIONS_SUFFIX


def labels_path(monitor: str, key: str) -> str:
    return monitor_path(monitor, f"{LABELS}/{key}.parquet")


def unnamed_pieces(store: Store, monitor: str, named: set[str]) -> list[str]:
    """The store paths of pieces and label files of the monitor that `named` (store paths)
    does not hold: left by a run that stopped before its state, or replaced."""
    found = [monitor_path(monitor, f"{folder}/{name}")
             for folder in (PIECES, LABELS) for name in store.list_dir(monitor_path(monitor,
                                                                                  folder))]
    return [path for path in found if path not in named]


def monitor_lock(store: Store, monitor: str) -> Lock:
    """Held while a run of the monitor works: two runs of one monitor never interleave."""
    return Lock(store, monitor_path(monitor), f"monitor {monitor}", wait_s=LOCK_WAIT_S)


def list_monitors(store: Store) -> list[str]:
    return [name for name in store.list_dir(MONITORS) if store.exists(state_path(name))]
