"""What the command line sets up before it runs a command: glibc's malloc keeps freed heap
(fewer page faults per batch) and other C libraries are left alone; pydantic loads no
plugins unless the user says otherwise, and then its plugin loader (package metadata) is
not imported at all."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import types
from pathlib import Path

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


# Loads a contract in a new process after the command line's settings, then prints whether
# importlib.metadata was imported and which plugin loader pydantic has.
LOAD_A_CONTRACT = """
import sys
from decflow import cli
cli._process_settings()
from decflow.contracts import load_contract
load_contract(sys.argv[1])
loader = sys.modules.get(cli.PYDANTIC_PLUGIN_LOADER)
print("importlib.metadata" in sys.modules, getattr(loader, "__file__", None) is not None)
"""
CONTRACT = Path(__file__).parents[1] / "fixtures/reference/decguard-examples/refund/decguard.yaml"


def _load_a_contract(disable_plugins: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if disable_plugins is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = disable_plugins
    done = subprocess.run([sys.executable, "-c", LOAD_A_CONTRACT, str(CONTRACT)], env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_with_plugins_off_a_contract_loads_without_reading_package_metadata() -> None:
    # metadata not imported; pydantic's own loader (a file) never imported
    assert _load_a_contract(None) == "False False"
    assert _load_a_contract("true") == "False False"


def test_with_plugins_on_pydantic_loads_them_with_its_own_loader() -> None:
    assert _load_a_contract("") == "True True"


def test_the_stand_in_hands_over_to_pydantics_loader_once_plugins_are_turned_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stand_in = cli._plugin_loader_loading_none()
    monkeypatch.setitem(sys.modules, cli.PYDANTIC_PLUGIN_LOADER, stand_in)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    assert list(stand_in.get_plugins()) == []
    assert sys.modules[cli.PYDANTIC_PLUGIN_LOADER] is stand_in

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")
    seen: list[str] = []
    own = types.ModuleType("own", None)
    vars(own)["get_plugins"] = lambda: seen.append("pydantic's") or ()
    monkeypatch.setattr(cli.importlib, "import_module",
                        lambda name: own if name == cli.PYDANTIC_PLUGIN_LOADER else None)
    assert list(stand_in.get_plugins()) == []
    assert seen == ["pydantic's"]
    assert cli.PYDANTIC_PLUGIN_LOADER not in sys.modules  # the real one is imported next
