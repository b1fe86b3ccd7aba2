"""What `decflow probe` reads from the command line: the agent and the inputs file."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from decflow.errors import DecflowError
from decflow.probe.runner import check_inputs


def _required_parameters(fn: Callable[..., Any]) -> int | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return sum(
        1 for p in signature.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def load_agent(spec: str) -> Callable[[str], Any]:
    """`module:function`: a factory taking no arguments that returns the agent, or the agent
    itself (a callable taking the input text). The current directory is importable, as it
    is for `python -m`."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise DecflowError(f"--agent {spec!r}: use module:function (for example mymod:build_agent)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DecflowError(f"--agent {spec!r}: cannot import {module_name!r} ({exc})") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise DecflowError(f"--agent {spec!r}: {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise DecflowError(f"--agent {spec!r}: {attribute!r} is not callable")
    if _required_parameters(target) != 0:
        return target  # type: ignore[no-any-return]
    try:
        agent = target()
    except Exception as exc:
        raise DecflowError(
            f"--agent {spec!r}: building the agent failed ({type(exc).__name__}: {exc})"
        ) from None
    if not callable(agent):
        raise DecflowError(
            f"--agent {spec!r}: {attribute}() returned {type(agent).__name__}, not a callable agent"
        )
    return agent  # type: ignore[no-any-return]


def read_inputs(path: str) -> list[str]:
    """One input per line (UTF-8); blank lines are left out; duplicates are refused."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DecflowError(f"{path}: cannot read the inputs ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DecflowError(f"{path}: the inputs file must be UTF-8") from None
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not numbered:
        raise DecflowError(f"{path}: no inputs (one input per line)")
    lines: dict[str, int] = {}
    for number, line in numbered:
        if line in lines:
            raise DecflowError(
                f"{path}: line {number} repeats line {lines[line]} ({line[:60]!r}); inputs must "
                "be distinct, because a copy counts one answer twice in the blindness skew"
            )
        lines[line] = number
    return check_inputs([line for _, line in numbered], path)
