"""The `systemone` backend: TypeSafe's System One wire format (Kev, Jev, OpenRouter).

One question per request, keyed by the decision name:
`{model, state: <input>, questions: {<name>: {type, instructions, criteria?}}}` where
`criteria` is `{option: null, ...}` for choice (presentation order), absent for noul, and
the list of levels (lowest first) for score. The answer is checked against what was asked
(`answers` keyed exactly by the decision name, same type, a served `model`), then turned
into probabilities keyed by the shown labels: choice from `probabilities` (and `choice`
must be a sent option with the highest probability), noul from `noul` = P(first label),
score from `probabilities` keyed by level index (`legend`, when present, must name the
levels sent). The provider's `confidence` is ignored.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from decflow.backends.base import DecisionRequest, DecisionSpec, InvalidResponse, Prediction
from decflow.backends.http import HttpBackend
from decflow.backends.http11 import HttpResponse
from decflow.backends.httpclient import JSON_BODY, json_object
from decflow.untrusted import quote

PROTOCOL = "typesafe.systemone/v1"
USAGE_FIELDS = ("input_tokens", "output_tokens", "cost")


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    """A number a float can hold (a 400-digit integer cannot)."""
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:
        return False


class SystemOneBackend(HttpBackend):
    """`settings` has the attributes of `contracts.providers.SystemOneSettings`."""

    provider = "systemone"
    protocol = PROTOCOL
    retry_statuses = frozenset({429, 502, 503, 504, 529})

    def __init__(self, name: str, model: str | None, settings: Any, decision: DecisionSpec) -> None:
        super().__init__(name, model, settings, decision)
        self.instructions = settings.instructions or decision.description
        self.served_models: set[str] = set()
        self.upstream_providers: set[str] = set()

    def payload(self, request: DecisionRequest, sent: tuple[str, ...]) -> dict[str, Any]:
        kind = request.decision.type
        question: dict[str, Any] = {"type": kind, "instructions": self.instructions}
        if kind == "choice":
            question["criteria"] = dict.fromkeys(sent)
        elif kind == "score":
            question["criteria"] = list(sent)
        return {
            "model": self.model,
            "state": request.input,
            "questions": {request.decision.name: question},
        }

    def body(self, request: DecisionRequest, sent: tuple[str, ...]) -> bytes:
        return JSON_BODY.encode(self.payload(request, sent)).encode()

    def parse(
        self, response: HttpResponse, request: DecisionRequest, sent: tuple[str, ...]
    ) -> Prediction:
        body, answer = _answer(response, request.decision)
        served = body.get("model")
        if not isinstance(served, str) or not served:
            raise InvalidResponse("response field 'model' must be a non-empty string")
        shown = request.decision.labels
        kind = request.decision.type
        if kind == "choice":
            probabilities = self.labels.from_backend(_choice(answer, sent), shown, sent)
        elif kind == "noul":
            probabilities = _noul(answer, shown)
        else:
            probabilities = _score(answer, shown, sent)
        metadata = _metadata(body, response)
        self.served_models.add(served)
        if "upstream_provider" in metadata:
            self.upstream_providers.add(metadata["upstream_provider"])
        return Prediction(
            probabilities,
            model=self.model,
            model_version=served,
            metadata=self.clean_metadata(metadata) or None,
        )

    def details(self) -> dict[str, Any]:
        return {
            **super().details(),
            "served_models": sorted(self.served_models),
            "upstream_providers": sorted(self.upstream_providers),
        }


def _answer(response: HttpResponse, decision: DecisionSpec) -> tuple[dict[str, Any], Any]:
    body = json_object(response)
    answers = body.get("answers")
    if not isinstance(answers, dict) or set(answers) != {decision.name}:
        raise InvalidResponse(
            f"response 'answers' must be an object keyed by {quote(decision.name)}"
        )
    answer = answers[decision.name]
    if not isinstance(answer, dict):
        raise InvalidResponse(f"answer {quote(decision.name)} is not an object")
    if answer.get("type") != decision.type:
        raise InvalidResponse(
            f"answer type {quote(answer.get('type'))} does not match the decision type "
            f"'{decision.type}'"
        )
    return body, answer


def _choice(answer: dict[str, Any], sent: tuple[str, ...]) -> dict[str, Any]:
    probabilities = answer.get("probabilities")
    if not isinstance(probabilities, dict):
        raise InvalidResponse("choice answer has no 'probabilities' object")
    choice = answer.get("choice")
    if not isinstance(choice, str) or choice not in sent or choice not in probabilities:
        raise InvalidResponse(f"choice {quote(choice)} is not one of the options sent")
    values = list(probabilities.values())
    # Only comparable when every value is a number; otherwise the engine reports the value.
    if all(_is_finite(v) for v in values) and probabilities[choice] < max(values):
        raise InvalidResponse(f"choice {quote(choice)} does not have the highest probability")
    return probabilities


def _noul(answer: dict[str, Any], shown: tuple[str, ...]) -> dict[str, Any]:
    noul = answer.get("noul")
    if not _is_number(noul) or not 0.0 <= noul <= 1.0:
        raise InvalidResponse(f"noul answer {quote(noul)} is not a number in [0, 1]")
    # Positional: `noul` is the probability of the first label as shown.
    return {shown[0]: noul, shown[1]: 1.0 - noul}


def _score(answer: dict[str, Any], shown: tuple[str, ...], sent: tuple[str, ...]) -> dict[str, Any]:
    probabilities = answer.get("probabilities")
    indices = [str(i) for i in range(len(sent))]
    if not isinstance(probabilities, dict) or set(probabilities) != set(indices):
        raise InvalidResponse(
            f"score answer 'probabilities' must be keyed by level index {indices}"
        )
    legend = answer.get("legend")
    if legend is not None and legend != dict(zip(indices, sent, strict=True)):
        raise InvalidResponse("score answer 'legend' does not match the levels sent")
    return {label: probabilities[index] for index, label in zip(indices, shown, strict=True)}


def _metadata(body: dict[str, Any], response: HttpResponse) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    request_id = body.get("id")
    if not isinstance(request_id, str) or not request_id:
        request_id = response.headers.get("x-typesafe-request-id")
    if request_id:
        metadata["request_id"] = request_id
    provider = body.get("provider")
    if isinstance(provider, str) and provider:
        metadata["upstream_provider"] = provider
    usage = body.get("usage")
    if isinstance(usage, dict):
        numbers = {k: usage[k] for k in USAGE_FIELDS if _is_number(usage.get(k))}
        if numbers:
            metadata["usage"] = numbers
    return metadata
