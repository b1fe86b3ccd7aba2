"""`probe(agent, inputs)`: agentverity's measure-first workflow on a plain callable.

Order: the rerun meter, blindness, then the relations (diagnostics first, the vehicle
second). Nothing here needs a contract; `ProbeResult.to_contract()` writes one from what
the agent answered. Defaults follow agentverity 0.3.0 (k = 5, ε = 0.01), so its quickstart
reads the same here; the interval then states how many pairs a certification would need.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from decflow.diagnostics.blindness import DEFAULT_THRESHOLD
from decflow.errors import DecflowError
from decflow.probe.agents import AgentCaller, AgentThread
from decflow.probe.analyse import ProbeSettings
from decflow.probe.collect import collect
from decflow.probe.observation import LAYERS
from decflow.probe.relations import Relation, builtin_relations
from decflow.probe.result import ProbeResult, build_result

DEFAULT_REPEATS = 5
DEFAULT_EPSILON = 0.01


def check_inputs(inputs: Any, where: str = "inputs") -> list[str]:
    """Distinct strings, at least one; a duplicate would count one answer twice."""
    if isinstance(inputs, str) or not isinstance(inputs, Sequence):
        raise DecflowError(f"{where}: give a list of input strings")
    values = list(inputs)
    if not values:
        raise DecflowError(f"{where}: no inputs to probe")
    first: dict[str, int] = {}
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise DecflowError(f"{where}[{i}]: inputs must be strings, got {type(value).__name__}")
        if value in first:
            raise DecflowError(
                f"{where}[{i}] repeats {where}[{first[value]}] ({value[:60]!r}); inputs must "
                "be distinct, because a copy counts one answer twice in the blindness skew"
            )
        first[value] = i
    return values


def _check_settings(repeats: Any, epsilon: Any, threshold: Any, layer: Any) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 2:
        raise DecflowError(
            f"repeats must be an integer >= 2 (a pair needs two draws), got {repeats!r}"
        )
    if not isinstance(epsilon, int | float) or not 0.0 < epsilon < 1.0:
        raise DecflowError(f"epsilon must be in (0, 1), got {epsilon!r}")
    if not isinstance(threshold, int | float) or not 0.0 < threshold <= 1.0:
        raise DecflowError(f"blindness_threshold must be in (0, 1], got {threshold!r}")
    if layer not in LAYERS:
        raise DecflowError(f"layer must be one of {', '.join(LAYERS)}, got {layer!r}")


def _check_relations(relations: Sequence[Relation]) -> None:
    names: set[str] = set()
    for relation in relations:
        if not isinstance(relation, Relation):
            raise DecflowError(f"relations: {relation!r} is not a decflow.probe.Relation")
        if relation.name in names:
            raise DecflowError(f"relations: the name {relation.name!r} is used twice")
        names.add(relation.name)


def agent_name(agent: Any) -> str:
    module = getattr(agent, "__module__", None)
    qualname = getattr(agent, "__qualname__", None) or type(agent).__qualname__
    return f"{module}:{qualname}" if module else qualname


def probe(
    agent: Callable[[str], Any] | AgentCaller,
    inputs: Sequence[str],
    *,
    repeats: int = DEFAULT_REPEATS,
    epsilon: float = DEFAULT_EPSILON,
    blindness_threshold: float = DEFAULT_THRESHOLD,
    relations: Sequence[Relation] | None = None,
    layer: str = "verdict",
    reuse_calls: bool = True,
    store: Any = None,
    name: str | None = None,
    call_timeout: float | None = None,
) -> ProbeResult:
    """Measure an agent callable (input text → answer) and test relations on it.

    `relations=None` runs the built-ins (normalization, case_swap, whitespace on `layer`,
    tool_selection on tools); `[]` runs diagnostics only. `store` (a URL or a Store) keeps
    the probe as a run: its observations table, record and report. The agent runs in a
    thread of its own (`decflow.probe.agents`): whatever a call raises, or a call that
    takes longer than `call_timeout` seconds (default `DECFLOW_CALL_TIMEOUT`, else 120),
    is an errored call.
    """
    if not isinstance(agent, AgentCaller):
        if not callable(agent):
            raise DecflowError(f"agent must be callable, got {type(agent).__name__}")
        agent = AgentThread(agent, agent_name(agent), call_timeout)
    values = check_inputs(inputs)
    _check_settings(repeats, epsilon, blindness_threshold, layer)
    chosen = builtin_relations(layer) if relations is None else list(relations)
    _check_relations(chosen)
    settings = ProbeSettings(
        agent=name or agent.name,
        repeats=repeats,
        epsilon=float(epsilon),
        blindness_threshold=float(blindness_threshold),
        layer=layer,
        reuse_calls=reuse_calls,
        relations=tuple((r.name, r.type) for r in chosen),
        rounding_seed=secrets.randbelow(2**63),
    )
    frame = collect(agent, values, chosen, repeats=repeats, reuse_calls=reuse_calls)
    failed = frame["text"].null_count()
    if failed == frame.height:
        raise DecflowError(
            f"every one of the {failed} agent calls failed; the first: {frame['error'][0]}"
        )
    if store is None:
        return build_result(frame, settings)
    from decflow.probe.storage import save

    return save(store, frame, settings)
