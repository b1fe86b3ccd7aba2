"""Readout arithmetic of the `openai` backend: response bodies → label distributions.

- First token (`readout: logprobs`): the candidates of the answer's first token
  (`top_logprobs`) are summed per label through an owner function (which label a token's
  text counts for, see `first_pieces`), renormalised over the labels; the raw mass that
  fell on labels is kept (`label_mass`); zero mass is `invalid_response`.
- Sequence (`readout: sequence`): log P(answer tokens | prompt) read from the log
  probabilities a completions endpoint echoes for its prompt (`echo: true`), one request
  per label, normalised over the labels; the raw mass is `label_mass`.

Echoed token lists omit special tokens (llama-cpp-python drops every BOS-id token, such as
SmolLM2's `<|im_start|>`), so the answer's tokens are found by counting from the end: first
the generated token(s), whose text follows the prompt in the echoed text, then the tokens
whose texts join to exactly the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from decflow.backends.base import InvalidResponse
from decflow.untrusted import quote


def path(body: Any, *steps: str | int) -> Any:
    """body[steps...] or InvalidResponse naming the missing part."""
    current = body
    for step in steps:
        try:
            current = current[step]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)
            raise InvalidResponse(f"response has no {where.lstrip('.')}") from None
    return current


LOGPROB_SLACK = 1e-6  # a log-probability is <= 0; servers may round log(1) a hair above


def _logprob(value: Any, token: str | None = None) -> float:
    """A log-probability from an answer (of `token`, when named): a finite number <= 0,
    else invalid_response."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidResponse("log probabilities must be numbers")
    try:
        number = float(value)  # an integer beyond a float's range overflows
    except OverflowError:
        number = math.inf
    if not (math.isfinite(number) and number <= LOGPROB_SLACK):
        what = "the log probability" if token is None else f"the logprob of token {quote(token)}"
        raise InvalidResponse(
            f"{what} is {quote(value)}, not a log-probability (a finite number <= 0)"
        )
    return number


def top_candidates(body: dict[str, Any], api: str) -> list[tuple[str, float]]:
    """(token text, logprob) of the first generated token's candidates.

    chat: `choices[0].logprobs.content[0].top_logprobs` (a list of `{token, logprob}`);
    completions: `choices[0].logprobs.top_logprobs[0]` (a `{token: logprob}` object)."""
    if api == "completions":
        top = path(body, "choices", 0, "logprobs", "top_logprobs", 0)
        if not isinstance(top, dict):
            raise InvalidResponse("response has no choices[0].logprobs.top_logprobs[0] object")
        return [(str(token), _logprob(value, str(token))) for token, value in top.items()]
    first = path(body, "choices", 0, "logprobs", "content", 0)
    candidates = (first.get("top_logprobs") or [first]) if isinstance(first, dict) else None
    if not isinstance(candidates, list):
        raise InvalidResponse("response has no choices[0].logprobs.content[0].top_logprobs")
    pairs = []
    for candidate in candidates:
        token = candidate.get("token") if isinstance(candidate, dict) else None
        if not isinstance(token, str):
            raise InvalidResponse("top_logprobs entries need a string token and a logprob")
        pairs.append((token, _logprob(candidate.get("logprob"), token)))
    return pairs


def generated_nothing(body: dict[str, Any], api: str) -> bool:
    """Whether the model ended its answer at once (end of text as the first token): servers
    then return no first-token candidates at all."""
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or choice.get("finish_reason") != "stop":
        return False
    logprobs = choice.get("logprobs")
    entries = logprobs.get("content" if api == "chat" else "top_logprobs") \
        if isinstance(logprobs, dict) else None
    return not entries


def first_token_distribution(
    candidates: Sequence[tuple[str, float]],
    owner: Callable[[str], str | None],
    names: Sequence[str],
) -> tuple[dict[str, float], float]:
    """(distribution over `names`, label mass) from first-token candidates."""
    mass = dict.fromkeys(names, 0.0)
    for token, logprob in candidates:
        name = owner(token)
        if name is not None:
            mass[name] += math.exp(logprob)
    label_mass = math.fsum(mass.values())
    if not label_mass > 0.0:
        raise InvalidResponse(
            f"no probability mass on any label among the top {len(candidates)} first tokens"
        )
    return {name: value / label_mass for name, value in mass.items()}, label_mass


def _echoed(body: dict[str, Any]) -> tuple[str, list[Any], list[Any]]:
    text = path(body, "choices", 0, "text")
    logprobs = path(body, "choices", 0, "logprobs")
    tokens = path(logprobs, "tokens")
    values = path(logprobs, "token_logprobs")
    if not isinstance(text, str) or not isinstance(tokens, list) or not isinstance(values, list) \
            or len(tokens) != len(values) or not all(isinstance(t, str) for t in tokens):
        raise InvalidResponse("echoed logprobs need 'tokens' and 'token_logprobs' of one length")
    return text, tokens, values


def answer_logprob(
    body: dict[str, Any], sent: str, answer: str, *, generated_listed: bool = True
) -> float:
    """log P(answer | prompt) from an echo of `sent` = prompt + answer.

    `generated_listed=False` reads a response whose token list stops at the prompt's end
    although text was generated (the echo alignment check needs to recognise one)."""
    text, tokens, values = _echoed(body)
    if not text.startswith(sent):
        raise InvalidResponse(
            "the completions response does not echo the prompt (readout: sequence needs a "
            "server that honours echo: true)"
        )
    generated = text[len(sent):]
    end = len(tokens)
    if generated_listed:
        tail = ""
        while len(tail) < len(generated) and end > 0:
            end -= 1
            tail = tokens[end] + tail
        if tail != generated:
            raise InvalidResponse("the echoed tokens do not end with the generated text")
        if not generated and end and not (tokens[end - 1] and answer.endswith(tokens[end - 1])):
            end -= 1  # a generated special token (end of text) has no text of its own
    start, joined = end, ""
    while len(joined) < len(answer) and start > 0:
        start -= 1
        joined = tokens[start] + joined
    if joined != answer:
        raise InvalidResponse(
            f"the echoed tokens before the generated text do not spell the answer {answer!r}"
        )
    picked = values[start:end]
    if any(v is None for v in picked):
        raise InvalidResponse(f"the server gave no log probability for a token of {answer!r}")
    return math.fsum(_logprob(v) for v in picked)


def normalised(logprobs: dict[str, float]) -> tuple[dict[str, float], float]:
    """(distribution, label mass) from per-label sequence log probabilities; computed
    relative to the largest, so long labels' tiny probabilities do not underflow."""
    top = max(logprobs.values())
    if top == -math.inf:
        raise InvalidResponse("every label has probability 0")
    weights = {name: math.exp(value - top) for name, value in logprobs.items()}
    total = math.fsum(weights.values())
    return {name: w / total for name, w in weights.items()}, math.exp(top) * total
