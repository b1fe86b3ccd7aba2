"""Locks on store entries: a run is worked on by one process at a time, and an accepted
baseline is changed by one `runs accept` at a time.

Two mechanisms, chosen by the store:

- **Local store** (POSIX): the lock file (`runs/<id>/lock`) is created if absent and held
  with an exclusive `flock`. The kernel drops the lock when its process ends for any reason,
  `kill -9` included, so "held" is a fact the next reader checks, never a guess from a
  timestamp; a lock file left by a killed process is simply taken over. The file holds who
  holds it (host, pid, command, since) for error messages and `decflow runs`.
- **Object store** (no atomic exclusive create, no process to watch): a lease object
  (`runs/<id>/lease.json`: holder, token, expiry) written, then read back after
  `LeasePolicy.settle_s` (the last writer wins; the loser backs off), and renewed by a
  heartbeat thread every `heartbeat_s` until released. A lease whose expiry has passed
  (its holder was killed, or lost its connection) is taken over; a live one is refused.
  Holders' clocks must agree within the expiry margin.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from decflow.errors import DecflowError
from decflow.store.store import Store, store_os_error

try:  # POSIX; elsewhere every store uses leases
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK = "lock"
LEASE = "lease.json"
PEEKS = 5  # a lock found held this many times in a row (20 ms apart) is held


class LockHeld(DecflowError):
    """The entry is held by another process (`holder` describes it)."""

    def __init__(self, what: str, holder: dict[str, Any], path: str) -> None:
        self.holder = holder
        super().__init__(f"{what} is held by {describe(holder)} (lock {path}); wait for it "
                         "to finish, or stop that process")


def describe(holder: dict[str, Any]) -> str:
    """`pid 123 on host h (decflow test …) since 2026-…` for messages."""
    command = holder.get("command")
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
            + (f" ({command})" if command else "")
            + f" since {holder.get('since', '?')}")


def this_process() -> dict[str, Any]:
    """Who is asking: host, pid, the command line, the time."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "command": " ".join(["decflow", *sys.argv[1:]])[:300],
        "since": datetime.now(UTC).replace(microsecond=0).isoformat(),
    }


@dataclass(frozen=True)
class LeasePolicy:
    """Timing of object-store leases (seconds)."""

    expiry_s: float = 90.0
    heartbeat_s: float = 20.0
    settle_s: float = 2.0


LEASES = LeasePolicy()


def _uses_flock(store: Store) -> bool:
    return store.is_local and fcntl is not None


class Lock:
    """An exclusive lock on `folder` (store-relative) of `store`; `what` names it in
    messages. `acquire()` raises `LockHeld` when another process holds it (after waiting up
    to `wait_s` for it to let go)."""

    def __init__(self, store: Store, folder: str, what: str, *, wait_s: float = 0.0,
                 policy: LeasePolicy = LEASES) -> None:
        self.store, self.folder, self.what, self.policy = store, folder, what, policy
        self.wait_s = wait_s
        self.holder = this_process()
        self._fd: int | None = None
        self._token: str | None = None
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self.lost = False  # a lease another process took over (it had expired)

    @property
    def path(self) -> str:
        return self.store.uri(f"{self.folder}/{LOCK if _uses_flock(self.store) else LEASE}")

    def __enter__(self) -> Lock:
        self.acquire(self.wait_s)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock, waiting up to `wait_s` for a holder to let go."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if _uses_flock(self.store):
                    self._acquire_file()
                else:
                    self._acquire_lease()
                return
            except LockHeld:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            # unlinked first: a waiter that opened it re-checks the path (`_acquire_file`)
            with contextlib.suppress(OSError):
                os.unlink(self.store.path(f"{self.folder}/{LOCK}"))
            os.close(fd)
            with contextlib.suppress(OSError):  # a run that stopped before writing anything
                os.rmdir(self.store.path(self.folder))
        if self._token is not None:
            self._stop.set()
            if self._heartbeat is not None:
                self._heartbeat.join()
            current = _read_lease(self.store, self.folder)
            if current is not None and current.get("token") == self._token:
                _delete(self.store, f"{self.folder}/{LEASE}")
            self._token = None

    # -- local: flock ----------------------------------------------------------------------
    def _acquire_file(self) -> None:
        assert fcntl is not None
        path = self.store.path(f"{self.folder}/{LOCK}")
        blocked = 0
        for _attempt in range(50):
            try:  # (again: a holder letting go removes the folder it leaves empty)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise _os_error(exc, path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                blocked += 1
                if blocked < PEEKS:  # `holder_of` may be peeking: it lets go at once
                    time.sleep(0.02)
                    continue
                raise LockHeld(self.what, holder or {}, path) from None
            # The previous holder unlinks the file before it lets go: a file we opened just
            # before that is no longer the lock, and we start again with the path's file.
            try:
                current = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, json.dumps(self.holder).encode())
                except OSError as exc:
                    os.close(fd)
                    raise _os_error(exc, path) from None
                self._fd = fd
                return
            os.close(fd)
        raise DecflowError(f"{path}: could not take the lock (it kept changing)")

    # -- object stores: lease --------------------------------------------------------------
    def _lease(self) -> dict[str, Any]:
        return {**self.holder, "token": self._token,
                "expires_at": time.time() + self.policy.expiry_s}

    def _acquire_lease(self) -> None:
        relative = f"{self.folder}/{LEASE}"
        current = _read_lease(self.store, self.folder)
        if current is not None and _alive(current):
            raise LockHeld(self.what, current, self.path)
        self._token = uuid.uuid4().hex
        self.store.write_json(relative, self._lease())
        time.sleep(self.policy.settle_s)  # a concurrent taker's write lands by now
        current = _read_lease(self.store, self.folder)
        if current is None or current.get("token") != self._token:
            self._token = None
            raise LockHeld(self.what, current or {}, self.path)
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._renew, name="decflow-lease",
                                           daemon=True)
        self._heartbeat.start()

    def _renew(self) -> None:
        relative = f"{self.folder}/{LEASE}"
        while not self._stop.wait(self.policy.heartbeat_s):
            try:
                current = _read_lease(self.store, self.folder)
                if current is not None and current.get("token") != self._token:
                    self.lost = True  # taken over after it expired: stop renewing it
                    return
                self.store.write_json(relative, self._lease())
            except (OSError, DecflowError):
                continue  # try again at the next beat; the expiry leaves room for a few


def holder_of(store: Store, folder: str) -> dict[str, Any] | None:
    """Who holds the lock on `folder` now, or None when nobody does (a lock file left by a
    killed process, or an expired lease, is held by nobody)."""
    if not _uses_flock(store):
        current = _read_lease(store, folder)
        return current if current is not None and _alive(current) else None
    assert fcntl is not None
    path = store.path(f"{folder}/{LOCK}")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> dict[str, Any] | None:
    try:
        data = os.pread(fd, 4096, 0)
        found = json.loads(data)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _alive(lease: dict[str, Any]) -> bool:
    expires = lease.get("expires_at")
    return isinstance(expires, int | float) and expires > time.time()


def _read_lease(store: Store, folder: str) -> dict[str, Any] | None:
    relative = f"{folder}/{LEASE}"
    try:
        if not store.exists(relative):
            return None
        found = json.loads(store.read_bytes(relative))
    except (ValueError, DecflowError):
        return None  # half written by a process that died: nobody holds it
    return found if isinstance(found, dict) else None


def _delete(store: Store, relative: str) -> None:
    with contextlib.suppress(OSError):
        store.fs.rm(store.path(relative))


def _os_error(exc: OSError, path: str) -> DecflowError:
    return store_os_error(exc, "create the lock", path)
