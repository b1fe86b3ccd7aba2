"""What the command line sets up before it runs a command: glibc's malloc keeps freed heap
(fewer page faults per batch) and other C libraries are left alone; pydantic loads no
plugins unless the user says otherwise."""

from __future__ import annotations

import ctypes
import os
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


def test_pydantic_loads_no_plugins_unless_the_user_set_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "_keep_freed_heap", lambda: None)
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("_RJEM_MALLOC_CONF", raising=False)
    cli._process_settings()
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    assert os.environ["_RJEM_MALLOC_CONF"] == cli.JEMALLOC_CONF

    from pydantic.plugin._loader import get_plugins

    assert list(get_plugins()) == []  # pydantic reads the variable at each model it builds

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")  # the user's: load them all
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "narenas:4")
    cli._process_settings()
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == ""
    assert os.environ["_RJEM_MALLOC_CONF"] == "narenas:4"
