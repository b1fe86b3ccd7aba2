"""The worker process that hosts a probe agent (`python -P -s -m
decflow.probe.agent_host`, started by `decflow.probe.agents.AgentProcess`).

The agent is imported here by its `module:function` name. The working directory is where
agent modules usually live, so it is importable, but last on the path: a `json.py` or a
`decflow/` folder there never shadows an installed module. Each call's answer is read
into an `Observation` here and sent back as JSON (`observation_json`).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from decflow.errors import DecflowError
from decflow.probe.agents import check_spec
from decflow.probe.observation import MalformedAnswer, observation_json, observe
from decflow.workers.serve import exception_text, serve


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
    itself (a callable taking the input text)."""
    module_name, attribute = check_spec(spec)
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
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


class AgentHost:
    """The `serve` handler: `load` the agent once, then `call` it per input."""

    def __init__(self) -> None:
        self.agent: Callable[[str], Any] | None = None

    def failure(self, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, DecflowError):
            return {"decflow": True, "message": str(exc)}
        if isinstance(exc, MalformedAnswer):
            return {"malformed": True, "message": str(exc)}
        return {"message": exception_text(exc)}

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "load":
            self.agent = load_agent(str(args["spec"]))
            return None
        if op == "call" and self.agent is not None:
            return observation_json(observe(self.agent(str(args["text"]))))
        raise ValueError(f"unknown call {op!r}")


if __name__ == "__main__":
    serve(AgentHost(), sys.argv[1:])
