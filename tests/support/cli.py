"""Run the CLI in-process and capture what it prints (exit code, stdout, stderr)."""

from __future__ import annotations

import contextlib
import io

from decflow.cli import invoke


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(list(args))
    return code, out.getvalue(), err.getvalue()
