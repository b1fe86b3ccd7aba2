"""What one agent call answered, read into three comparable layers.

An agent may answer with a verdict string, a `{label: probability}` mapping, or an object
(or dict) with `verdict`, `text` and `tools`. Everything the probe compares goes through
`layer_key`, so the meter, blindness and the built-in relations agree on what "the same
answer" means: the verdict (the text when there is none), the exact text, or the ordered
tool names.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Layer = Literal["verdict", "text", "tools"]
LAYERS: tuple[str, ...] = ("verdict", "text", "tools")
TOOL_SEPARATOR = " > "
_FIELDS = ("verdict", "text", "tools", "probabilities")


class MalformedAnswer(ValueError):
    """The agent returned something the probe cannot read (recorded as an errored call)."""


def layer_key(verdict: str | None, text: str, tools: Sequence[str], layer: str) -> str:
    """The value compared on `layer`; a missing verdict falls back to the text."""
    if layer == "verdict":
        return text if verdict is None else verdict
    if layer == "text":
        return text
    if layer == "tools":
        return TOOL_SEPARATOR.join(tools)
    raise ValueError(f"layer must be one of {', '.join(LAYERS)}, got {layer!r}")


@dataclass(frozen=True)
class Observation:
    text: str
    verdict: str | None = None
    tools: tuple[str, ...] = ()
    # Normalised to sum 1, in the order the agent gave the labels; None for plain verdicts.
    probabilities: tuple[tuple[str, float], ...] | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    def key(self, layer: str = "verdict") -> str:
        return layer_key(self.verdict, self.text, self.tools, layer)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _label(value: Any, what: str) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if not isinstance(value, str):
        raise MalformedAnswer(f"{what} must be a string, got {type(value).__name__}")
    return value


def _probabilities(mapping: Mapping[Any, Any]) -> tuple[tuple[str, float], ...]:
    items = [(_label(k, "a probability label"), float(v)) for k, v in mapping.items()]
    if not items:
        raise MalformedAnswer("the probability mapping is empty")
    if any(not math.isfinite(p) or p < 0.0 for _, p in items):
        raise MalformedAnswer("probabilities must be finite and non-negative")
    total = math.fsum(p for _, p in items)
    if total <= 0.0:
        raise MalformedAnswer("probabilities sum to 0")
    return tuple((label, p / total) for label, p in items)


def _argmax(probabilities: tuple[tuple[str, float], ...]) -> str:
    # max keeps the first of equal maxima: ties go to the label the agent listed first.
    return max(probabilities, key=lambda item: item[1])[0]


def _tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise MalformedAnswer("tools must be a list of tool names")
    names = tuple(_label(getattr(t, "name", t), "a tool name") for t in value)
    if any(not name for name in names):
        raise MalformedAnswer("tool names must not be empty")
    return names


def _from_fields(get: Any, raw: Any) -> Observation:
    probabilities = get("probabilities")
    probs = None if probabilities is None else _probabilities(probabilities)
    verdict = get("verdict")
    verdict = _argmax(probs) if verdict is None and probs else verdict
    verdict = None if verdict is None else _label(verdict, "verdict")
    text = get("text")
    text = (verdict or "") if text is None else _label(text, "text")
    return Observation(text, verdict, _tools(get("tools")), probs, raw)


def observe(answer: Any) -> Observation:
    """Read an agent's answer; MalformedAnswer names what could not be read."""
    if isinstance(answer, Observation):
        return answer
    if isinstance(answer, str | enum.Enum):
        verdict = _label(answer, "verdict")
        return Observation(verdict, verdict, raw=answer)
    if isinstance(answer, Mapping):
        if answer and all(_is_number(v) for v in answer.values()):
            probs = _probabilities(answer)
            verdict = _argmax(probs)
            return Observation(verdict, verdict, (), probs, answer)
        unknown = [k for k in answer if k not in _FIELDS]
        if unknown or not answer:
            raise MalformedAnswer(
                "a dict answer is either {label: probability} or has the keys "
                f"{', '.join(_FIELDS)}; got keys {list(answer)[:5]}"
            )
        return _from_fields(answer.get, answer)
    if any(hasattr(answer, name) for name in ("verdict", "text", "tools")):
        return _from_fields(lambda name: getattr(answer, name, None), answer)
    raise MalformedAnswer(
        f"the agent returned {type(answer).__name__}; return a verdict string, a "
        "{label: probability} dict, or an object with verdict/text/tools"
    )


# -- an observation as JSON (between a probe and its agent's worker process) -------------


def observation_json(observation: Observation) -> dict[str, Any]:
    return {
        "text": observation.text,
        "verdict": observation.verdict,
        "tools": list(observation.tools),
        "probabilities": None if observation.probabilities is None
        else [list(pair) for pair in observation.probabilities],
    }


def observation_from(data: Any) -> Observation:
    """The parent's `Observation` from the worker's JSON (MalformedAnswer if it is not one)."""
    if not isinstance(data, dict):
        raise MalformedAnswer("the agent worker's answer is not an observation")
    text, verdict, tools = data.get("text"), data.get("verdict"), data.get("tools")
    pairs = data.get("probabilities")
    if (not isinstance(text, str) or not (verdict is None or isinstance(verdict, str))
            or not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
        raise MalformedAnswer("the agent worker's answer is not an observation")
    probabilities = None
    if pairs is not None:
        try:
            probabilities = tuple((str(label), float(p)) for label, p in pairs)
        except (TypeError, ValueError):
            raise MalformedAnswer("the agent worker's probabilities are not pairs") from None
    return Observation(text, verdict, tuple(tools), probabilities)
