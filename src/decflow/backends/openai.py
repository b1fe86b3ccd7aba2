"""The `openai` backend: label probabilities from any OpenAI-compatible chat completions API.

Two readouts (`settings.readout`):

- `logprobs`: one request with `max_tokens: 1, logprobs: true, top_logprobs: 20`. A returned
  first token counts for a label when, stripped and case-folded, it is a non-empty prefix of
  exactly that label's shown form (case-folded). Label masses are renormalised; the raw
  mass that fell on labels is kept as metadata `label_mass`; zero mass is
  `invalid_response`. Labels whose first tokens cannot be told apart are refused before any
  call (`first_token_collisions`).
- `sample`: `samples` separate requests at `temperature` (no fixed seed; llama.cpp ignores
  `n`), each answer parsed to a label; the distribution is the share of parsed answers.

Works against llama.cpp's server (llama-cpp-python) and the OpenAI API. The model always
gets an explicit system message: chat servers otherwise insert their template's default.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from decflow.backends.base import (
    Backend,
    DecisionRequest,
    DecisionSpec,
    Health,
    InvalidResponse,
    Prediction,
)
from decflow.backends.httpclient import HttpCaller, json_object, public_url
from decflow.errors import ConfigurationError
from decflow.untrusted import quote

PROTOCOL = "openai.chat.completions"
TOP_LOGPROBS = 20  # the OpenAI API's maximum
SAMPLE_MAX_TOKENS = 32
RETRY_BACKOFF_S = 0.5
LOGPROB_SLACK = 1e-6  # a log-probability is <= 0; servers may round log(1) a hair above
RETRY_STATUSES = frozenset({429, *range(500, 600)})
UNAVAILABLE_STATUSES = frozenset({429, 502, 503, 504})

SYSTEM_MESSAGE = (
    "You are a classifier. Read the question, the input and the options. Answer with exactly "
    "one of the options, written exactly as shown, and nothing else."
)
DEFAULT_PROMPT = (
    "Question: {description}\n\nInput:\n{input}\n\nOptions:\n{options}\n\n"
    "Answer with one option, exactly as written."
)


def _first_token_form(label: str) -> str:
    return label.strip().casefold()


def first_token_collisions(shown_labels: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of shown labels that a first-token readout may not tell apart.

    decflow cannot see the server's tokenizer, so the rule is conservative and
    tokenizer-independent, on stripped, case-folded forms: two labels collide when one is a
    prefix of the other (then the shorter can never get a token of its own), when they
    share their first two characters (a first token such as "Re" for "Replace"/"Reject" lies
    inside the shared part), or when they share a first character that is not a letter
    (tokenizers emit punctuation and digits as tokens of their own: `"yes"`/`"no"`).
    """
    pairs = []
    for a, b in combinations(shown_labels, 2):
        x, y = _first_token_form(a), _first_token_form(b)
        shared = len(_common_prefix(x, y))
        if x.startswith(y) or y.startswith(x) or shared >= 2 or (
            shared == 1 and not x[0].isalpha()
        ):
            pairs.append((a, b))
    return pairs


def _common_prefix(x: str, y: str) -> str:
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return x[:n]


def check_first_tokens(shown_labels: Sequence[str], backend_name: str = "default") -> None:
    """Raise ConfigurationError (exit 2) naming the labels a logprobs readout cannot separate."""
    pairs = first_token_collisions(shown_labels)
    if pairs:
        named = "; ".join(f"{a!r} and {b!r}" for a, b in pairs)
        raise ConfigurationError(
            f"openai backend '{backend_name}': readout 'logprobs' cannot tell these labels "
            f"apart by their first token: {named}. Rename the labels (or drop the "
            "label_format styles that produce them), or use readout: sample"
        )


def _normalise_answer(text: str) -> str:
    """Case-folded, punctuation removed, whitespace collapsed."""
    kept = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return " ".join(kept.casefold().split())


def parse_answer(text: str, labels: Sequence[str]) -> str | None:
    """The label a sampled answer names: an exact match after stripping punctuation and
    case, else the single label it contains as whole words; None when neither applies."""
    answer = _normalise_answer(text)
    forms = {label: _normalise_answer(label) for label in labels}
    exact = [label for label, form in forms.items() if form and form == answer]
    if len(exact) == 1:
        return exact[0]
    contained = [
        label
        for label, form in forms.items()
        if form and re.search(rf"(?<!\w){re.escape(form)}(?!\w)", answer)
    ]
    return contained[0] if len(contained) == 1 else None


def _path(body: Any, *steps: str | int) -> Any:
    """body[steps...] or InvalidResponse naming the missing part."""
    current = body
    for step in steps:
        try:
            current = current[step]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)
            raise InvalidResponse(f"response has no {where.lstrip('.')}") from None
    return current


class OpenAIBackend(Backend):
    """`settings` has the attributes of `contracts.providers.OpenAISettings` (url,
    api_key_env, readout, samples, temperature, prompt, timeout_s, max_retries, health_url,
    max_tokens); `decision` is the canonical decision spec."""

    provider = "openai"

    def __init__(self, name: str, model: str | None, settings: Any, decision: DecisionSpec) -> None:
        super().__init__(name, model)
        self.settings = settings
        self.decision = decision
        self.url: str = settings.url.rstrip("/")
        self.endpoint = f"{self.url}/chat/completions"
        self.health_url: str = settings.health_url or f"{self.url}/models"
        self.prompt: str = settings.prompt or DEFAULT_PROMPT
        self.caller = HttpCaller(
            provider=self.provider,
            backend_name=name,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            retry_backoff_s=RETRY_BACKOFF_S,
            bearer_token_env=settings.api_key_env,
            retry_statuses=RETRY_STATUSES,
            unavailable_statuses=UNAVAILABLE_STATUSES,
        )
        self.served_models: set[str] = set()
        self._separable: set[tuple[str, ...]] = set()

    # -- request ---------------------------------------------------------------------------

    def messages(self, request: DecisionRequest) -> list[dict[str, str]]:
        value = request.input
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        description = (
            request.decision.description
            or self.decision.description
            or f"Decide '{request.decision.name}' for the input."
        )
        user = self.prompt.format(
            description=description, input=text, options="\n".join(request.decision.labels)
        )
        return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": user}]

    async def _complete(self, request: DecisionRequest, **options: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {"messages": self.messages(request), **options}
        if self.model is not None:
            payload["model"] = self.model
        body = json_object(await self.caller.post_json(self.endpoint, payload))
        served = body.get("model")
        if isinstance(served, str) and served:
            self.served_models.add(served)
        return body

    # -- readouts ----------------------------------------------------------------------------

    def check_presentations(self, presentations: Sequence[Sequence[str]]) -> None:
        if self.settings.readout == "logprobs":
            for shown in presentations:
                check_first_tokens(shown, self.name)

    async def predict(self, request: DecisionRequest) -> Prediction:
        if self.settings.readout == "sample":
            return await self._sample(request)
        return await self._logprobs(request)

    async def _logprobs(self, request: DecisionRequest) -> Prediction:
        labels = request.decision.labels
        if labels not in self._separable:
            check_first_tokens(labels, self.name)
            self._separable.add(labels)
        body = await self._complete(
            request,
            max_tokens=1,
            logprobs=True,
            top_logprobs=TOP_LOGPROBS,
            temperature=self.settings.temperature,
        )
        first = _path(body, "choices", 0, "logprobs", "content", 0)
        candidates = (first.get("top_logprobs") or [first]) if isinstance(first, dict) else None
        if not isinstance(candidates, list):
            raise InvalidResponse("response has no choices[0].logprobs.content[0].top_logprobs")
        forms = [_first_token_form(label) for label in labels]
        mass = dict.fromkeys(labels, 0.0)
        for candidate in candidates:
            token = candidate.get("token") if isinstance(candidate, dict) else None
            logprob = candidate.get("logprob") if isinstance(candidate, dict) else None
            if not isinstance(token, str) or isinstance(logprob, bool) or not isinstance(
                logprob, int | float
            ):
                raise InvalidResponse("top_logprobs entries need a string token and a logprob")
            if not _is_log_probability(logprob):
                raise InvalidResponse(
                    f"top_logprobs: the logprob of token {quote(token)} is {quote(logprob)}, "
                    "not a log-probability (a finite number <= 0)"
                )
            piece = _first_token_form(token)
            matching = [label for label, form in zip(labels, forms, strict=True)
                        if piece and form.startswith(piece)]
            if len(matching) == 1:
                mass[matching[0]] += math.exp(logprob)
        label_mass = math.fsum(mass.values())
        if not label_mass > 0.0:
            raise InvalidResponse(
                f"no probability mass on any label among the top {TOP_LOGPROBS} first tokens"
            )
        return Prediction(
            {label: value / label_mass for label, value in mass.items()},
            model=self.model,
            model_version=_served(body),
            metadata={"label_mass": label_mass},
        )

    async def _sample(self, request: DecisionRequest) -> Prediction:
        labels = request.decision.labels
        samples: int = self.settings.samples
        counts: Counter[str] = Counter()
        served = None
        # One request at a time: the engine's concurrency bound counts decisions, and
        # parallel samples would multiply the load it allows.
        for _ in range(samples):
            body = await self._complete(
                request,
                temperature=self.settings.temperature,
                max_tokens=self.settings.max_tokens or SAMPLE_MAX_TOKENS,
            )
            served = _served(body) or served
            message = _path(body, "choices", 0, "message")
            if not isinstance(message, dict):
                raise InvalidResponse("response has no choices[0].message object")
            content = message.get("content")
            label = parse_answer(content, labels) if isinstance(content, str) else None
            if label is not None:
                counts[label] += 1
        parsed = sum(counts.values())
        if not parsed:
            raise InvalidResponse(f"none of the {samples} sampled answers names one option")
        return Prediction(
            {label: counts[label] / parsed for label in labels},
            model=self.model,
            model_version=served,
            metadata={"samples": samples, "parsed": parsed, "unparseable": samples - parsed},
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def healthcheck(self) -> Health:
        return await self.caller.health(self.health_url)

    def details(self) -> dict[str, Any]:
        return {
            "url": public_url(self.url),
            "protocol": PROTOCOL,
            "readout": self.settings.readout,
            "served_models": sorted(self.served_models),
        }

    async def aclose(self) -> None:
        await self.caller.aclose()


def _is_log_probability(value: int | float) -> bool:
    # An integer beyond a float's range fails the comparison's conversion.
    try:
        return math.isfinite(value) and value <= LOGPROB_SLACK
    except OverflowError:
        return False


def _served(body: dict[str, Any]) -> str | None:
    served = body.get("model")
    return served if isinstance(served, str) and served else None
