"""Run the CLI in-process and capture what it prints (exit code, stdout, stderr), or start it
as a process of its own."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from decflow.cli import invoke

# The end of a script run with `python -c SCRIPT ARGS` after it patched what a test
# watches: the `decflow` command with ARGS, as its entry point runs it.
RUN_DECFLOW = """
sys.argv = ["decflow", *sys.argv[1:]]
from decflow.__main__ import main
main()
"""


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(list(args))
    return code, out.getvalue(), err.getvalue()


def start_decflow(*args: str, cwd: Path, stdout: int | None = subprocess.DEVNULL,
                  ) -> subprocess.Popen[bytes]:
    """`python -m decflow ARGS` as its own process (signals, kills, locks), with neither a
    Prefect server nor a default store from the environment; stderr is piped."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DECFLOW_STORE")}
    return subprocess.Popen([sys.executable, "-m", "decflow", *args], cwd=cwd, env=env,
                            stdout=stdout, stderr=subprocess.PIPE)
