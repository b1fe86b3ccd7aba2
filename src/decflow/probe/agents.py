"""How the probe calls an agent, so that nothing the agent does ends the probe early.

`AgentProcess` (the CLI's `--agent module:function`) runs the agent in a worker process
(`decflow.probe.agent_host`): a `sys.exit`, an `os._exit`, a crash or a hang there is an
errored call. `AgentThread` (an agent handed to `decflow.probe()` as an object) runs each
call in a daemon thread: whatever it raises is an errored call, and a call past its
timeout is recorded as `timeout` and its thread abandoned. Either way a call gets
`timeout` seconds (`DECFLOW_CALL_TIMEOUT`, 120 by default).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from decflow.errors import DecflowError
from decflow.probe.observation import MalformedAnswer, Observation, observation_from, observe
from decflow.workers.process import CallFailed, WorkerFailed, shared_worker
from decflow.workers.settings import call_timeout
from decflow.workers.threads import CallRaised, CallTimedOut, call_in_thread

HOST = "decflow.probe.agent_host"
Answer = tuple[Observation | None, str | None]


def check_spec(spec: str) -> tuple[str, str]:
    """(module, attribute) of `module:function`."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise DecflowError(f"--agent {spec!r}: use module:function (for example mymod:build_agent)")
    return module_name, attribute


class AgentCaller(ABC):
    """One way of calling an agent: `ask` returns its observation or the error text."""

    name: str

    @abstractmethod
    def ask(self, text: str) -> Answer:
        """(observation, None) for an answer, (None, error) for a failed call."""


class AgentThread(AgentCaller):
    def __init__(self, agent: Callable[[str], Any], name: str,
                 timeout: float | None = None) -> None:
        self.agent = agent
        self.name = name
        self.timeout = call_timeout(timeout)

    def ask(self, text: str) -> Answer:
        try:
            return call_in_thread(lambda: observe(self.agent(text)), timeout=self.timeout), None
        except CallRaised as exc:
            if isinstance(exc.original, MalformedAnswer):
                return None, f"malformed answer: {exc.original}"
            return None, str(exc)
        except CallTimedOut:
            return None, f"timeout: the agent did not answer within {self.timeout:g}s"


class AgentProcess(AgentCaller):
    def __init__(self, spec: str, timeout: float | None = None) -> None:
        check_spec(spec)
        self.name = spec
        self.timeout = call_timeout(timeout)
        self.worker = shared_worker(HOST, spec, f"agent {spec}")
        try:
            self.worker.setup(spec, "load", {"spec": spec}, self.timeout)
        except CallFailed as exc:
            message = str(exc.failure.get("message"))
            if not exc.failure.get("decflow"):
                message = f"--agent {spec!r}: loading the agent failed ({message})"
            raise DecflowError(message) from None
        except WorkerFailed as exc:
            raise DecflowError(f"--agent {spec!r}: the agent could not be loaded: {exc}") from None

    def ask(self, text: str) -> Answer:
        try:
            return observation_from(self.worker.request("call", {"text": text},
                                                        self.timeout)), None
        except CallFailed as exc:
            message = str(exc.failure.get("message"))
            return None, f"malformed answer: {message}" if exc.failure.get("malformed") else message
        except WorkerFailed as exc:
            return None, f"{exc.kind}: {exc}"
        except MalformedAnswer as exc:
            return None, f"malformed answer: {exc}"
