"""Run locks: one holder at a time, a killed holder's lock is free, and on object stores a
lease renewed by a heartbeat is taken over only after it expires."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from decflow.store.locks import LeasePolicy, Lock, LockHeld, holder_of
from decflow.store.store import Store

FAST = LeasePolicy(expiry_s=0.6, heartbeat_s=0.1, settle_s=0.05)


def test_a_local_lock_has_one_holder_at_a_time(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    first = Lock(store, "runs/r1", "run r1")
    first.acquire()
    held = holder_of(store, "runs/r1")
    assert held is not None and held["pid"] == os.getpid()
    with pytest.raises(LockHeld) as refused:
        Lock(store, "runs/r1", "run r1").acquire()
    assert str(refused.value).startswith(f"run r1 is held by pid {os.getpid()} on host ")
    assert f"(lock {tmp_path}/runs/r1/lock)" in str(refused.value)
    first.release()
    assert holder_of(store, "runs/r1") is None
    assert not (tmp_path / "runs" / "r1").exists()  # nothing else was written there
    with Lock(store, "runs/r1", "run r1"):
        assert holder_of(store, "runs/r1") is not None


def test_a_lock_file_left_by_a_killed_process_is_free(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "lock").write_text(json.dumps({"pid": 1, "host": "gone"}))
    assert holder_of(store, "runs/r1") is None  # no process holds it: the kernel says so
    with Lock(store, "runs/r1", "run r1"):
        held = holder_of(store, "runs/r1")
        assert held is not None and held["pid"] == os.getpid()


def test_a_waiting_lock_takes_over_when_the_holder_lets_go(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    first = Lock(store, "accepted/d", "baselines")
    first.acquire()
    threading.Timer(0.3, first.release).start()
    started = time.monotonic()
    with Lock(store, "accepted/d", "baselines", wait_s=5):
        assert time.monotonic() - started >= 0.25


def _memory() -> Store:
    return Store(f"memory://locks-{uuid.uuid4().hex}")


def test_a_lease_is_renewed_while_held_and_refused_to_others() -> None:
    store = _memory()
    first = Lock(store, "runs/r1", "run r1", policy=FAST)
    first.acquire()
    time.sleep(3 * FAST.expiry_s)  # well past one expiry: the heartbeat renewed it
    with pytest.raises(LockHeld) as refused:
        Lock(store, "runs/r1", "run r1", policy=FAST).acquire()
    assert f"pid {os.getpid()}" in str(refused.value)
    assert "lease.json" in str(refused.value)
    first.release()
    assert holder_of(store, "runs/r1") is None
    with Lock(store, "runs/r1", "run r1", policy=FAST):
        assert holder_of(store, "runs/r1") is not None


def test_a_lease_whose_holder_stopped_is_taken_over_after_it_expires() -> None:
    store = _memory()
    crashed = Lock(store, "runs/r1", "run r1", policy=FAST)
    crashed.acquire()
    crashed._stop.set()  # the holder dies: no more heartbeats, no release
    assert crashed._heartbeat is not None
    crashed._heartbeat.join()
    with pytest.raises(LockHeld):  # not before it expires
        Lock(store, "runs/r1", "run r1", policy=FAST).acquire()
    time.sleep(FAST.expiry_s)
    taker = Lock(store, "runs/r1", "run r1", policy=FAST)
    taker.acquire()
    assert holder_of(store, "runs/r1") is not None
    taker.release()


def test_two_lease_takers_at_once_leave_one_holder() -> None:
    store = _memory()
    outcomes: list[str] = []
    locks = [Lock(store, "runs/r1", "run r1", policy=FAST) for _ in range(2)]

    def take(lock: Lock) -> None:
        try:
            lock.acquire()
            outcomes.append("held")
        except LockHeld:
            outcomes.append("refused")

    threads = [threading.Thread(target=take, args=(lock,)) for lock in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["held", "refused"]
    for lock in locks:
        lock.release()
