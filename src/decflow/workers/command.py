"""How decflow starts a child Python: isolated from the current directory and user site.

`python -m module` (and `-c`) put the current directory first on the import path, so a
`decflow/` folder, a `json.py` or a `polars.py` in an untrusted checkout would be imported
by the child instead of the installed ones. Children start with `-P` (no unsafe path
prepended) and `-s` (no user site), but keep the environment, so a trusted `PYTHONPATH`
still works. `-s` is left out when decflow itself was imported from the user site: the
child could not import it otherwise. `multiprocessing`'s spawn workers are started by
multiprocessing itself, so `spawn_isolated` sets the equivalent environment variables
while a pool starts them.
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

# the environment equivalents of -P and -s (Python >= 3.11)
ISOLATING_ENVIRONMENT = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}
_ENVIRONMENT_LOCK = threading.Lock()


def _from_user_site() -> bool:
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if not user_site:
        return False
    package = Path(__file__).resolve().parents[1]  # the decflow package
    return Path(user_site).resolve() in package.parents


def interpreter_flags() -> list[str]:
    """The flags that isolate a child interpreter started by decflow."""
    return ["-P"] if _from_user_site() else ["-P", "-s"]


def python_module(module: str, *args: str) -> list[str]:
    """The command line running `python -m module args…` isolated from the current
    directory (and the user site)."""
    return [sys.executable, *interpreter_flags(), "-m", module, *args]


def trusted_path() -> list[str]:
    """This process's import path without the current directory (`''` or its absolute
    name), for a child that should find what this process finds (installed plugins, a
    test's temporary distribution) but nothing planted in the working directory."""
    here = os.getcwd()
    return [entry for entry in sys.path if entry and os.path.abspath(entry) != here]


@contextlib.contextmanager
def spawn_isolated() -> Iterator[None]:
    """While the block runs, processes started from this one (multiprocessing's spawn
    workers, which take no interpreter flags from decflow) start isolated as above."""
    flags = dict(ISOLATING_ENVIRONMENT)
    if _from_user_site():
        del flags["PYTHONNOUSERSITE"]
    with _ENVIRONMENT_LOCK:
        saved = {name: os.environ.get(name) for name in flags}
        os.environ.update(flags)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
