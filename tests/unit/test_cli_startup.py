"""What the command line sets up before it runs a command: glibc's malloc keeps freed heap
(fewer page faults per batch) and other C libraries are left alone."""

from __future__ import annotations

import ctypes
import sys

import pytest

from decflow import cli


class _Libc:
    def __init__(self, glibc: bool) -> None:
        self.calls: list[tuple[int, int]] = []
        if glibc:
            self.gnu_get_libc_version = lambda: b"2.36"

    def mallopt(self, option: int, value: int) -> int:
        self.calls.append((option, value))
        return 1


def test_glibc_keeps_freed_heap_below_the_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _Libc(glibc=True)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    cli._keep_freed_heap()
    assert libc.calls == [(-3, 64 << 20), (-1, 256 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def test_other_c_libraries_keep_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _Libc(glibc=False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    cli._keep_freed_heap()
    assert libc.calls == []

    def no_library(name: object) -> None:
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    cli._keep_freed_heap()  # nothing to set, nothing raised


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc on Linux")
def test_the_real_mallopt_accepts_the_thresholds() -> None:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        pytest.skip("not glibc")
    assert libc.mallopt(-3, cli.GLIBC_MMAP_THRESHOLD) == 1  # 1: accepted
    assert libc.mallopt(-1, cli.GLIBC_TRIM_THRESHOLD) == 1
