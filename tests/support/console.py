"""Run the `decflow` console script (the supported entry point) in a child process, as CI
would, and install a throwaway plugin distribution for it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CONSOLE = Path(sys.executable).parent / "decflow"


def console(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`decflow args…` in `cwd` with this environment plus `env`; output captured."""
    return subprocess.run([str(CONSOLE), *args], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)


def install_plugin(folder: Path, module: str, source: str,
                   entry_points: dict[str, dict[str, str]]) -> Path:
    """`module.py` and a dist-info registering `entry_points` ({group: {name: target}})
    in `folder`; returns the folder, for PYTHONPATH or sys.path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{module.replace('_', '-')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    lines = []
    for group, names in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in names.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return folder


def with_path(*folders: Path) -> dict[str, str]:
    """The environment's PYTHONPATH with `folders` in front."""
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([*map(str, folders), *([existing] if existing else [])])}
