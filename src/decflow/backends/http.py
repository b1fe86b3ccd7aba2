"""The `http` backend: protocol `decguard.http/0.1` (docs/openapi/decflow-http-0.1.yaml).

Request: `POST url` with `{protocol, case_id, model, decision: {name, type, labels}, input}`,
labels in presentation order and in the backend's names (`label_map`, applied by meaning:
see `labelmap`). Response 200: `{probabilities, model?, model_version?, metadata?}` keyed
exactly as sent. The engine validates the probabilities; this module rejects bodies that
are not the protocol's shape.
"""

from __future__ import annotations

from typing import Any

from decflow.backends.base import (
    Backend,
    DecisionRequest,
    DecisionSpec,
    Health,
    InvalidResponse,
    Prediction,
)
from decflow.backends.call_keys import sent_to
from decflow.backends.engine import mask_secret_keys
from decflow.backends.http11 import HttpResponse
from decflow.backends.httpclient import (
    JSON_BODY,
    UNAVAILABLE_STATUSES,
    HttpCaller,
    json_object,
    public_url,
    scrub,
)
from decflow.backends.labelmap import LabelTranslator

PROTOCOL = "decguard.http/0.1"
# A body's text up to the case id (`HttpBackend.payload`'s first key and value).
_BODY_START = f'{{"protocol":{JSON_BODY.encode(PROTOCOL)},"case_id":'
# bodies' middle parts kept per decision and labels sent (a run has a few presentations)
MAX_KEPT_MIDDLES = 1024


class HttpBackend(Backend):
    """A decision service speaking `decguard.http/0.1`.

    `settings` has the attributes of `contracts.providers.HttpSettings` (url, health_url,
    timeout_s, max_retries, retry_backoff_s, headers, headers_from_env, bearer_token_env,
    label_map); `decision` is the canonical decision spec (contract labels and order).
    """

    provider = "http"
    protocol = PROTOCOL
    retry_statuses: frozenset[int] = UNAVAILABLE_STATUSES

    def __init__(self, name: str, model: str | None, settings: Any, decision: DecisionSpec) -> None:
        super().__init__(name, model)
        self.settings = settings
        self.decision = decision
        self.url: str = settings.url
        self.health_url: str | None = settings.health_url
        self.labels = LabelTranslator(decision.labels, settings.label_map or {})
        self._middles: dict[tuple[str, str, tuple[str, ...]], str] = {}
        self.caller = HttpCaller(
            provider=self.provider,
            backend_name=name,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            retry_backoff_s=settings.retry_backoff_s,
            headers=settings.headers,
            headers_from_env=settings.headers_from_env,
            bearer_token_env=settings.bearer_token_env,
            retry_statuses=self.retry_statuses,
            unavailable_statuses=self.retry_statuses,
        )

    async def predict(self, request: DecisionRequest) -> Prediction:
        sent = self.labels.to_backend(request.decision.labels)
        response = await self.caller.post_encoded(self.url, self.body(request, sent))
        return self.parse(response, request, sent)

    def payload(self, request: DecisionRequest, sent: tuple[str, ...]) -> dict[str, Any]:
        decision = request.decision
        return {
            "protocol": PROTOCOL,
            "case_id": request.case_id,
            "model": self.model,
            "decision": {"name": decision.name, "type": decision.type, "labels": list(sent)},
            "input": request.input,
        }

    def body(self, request: DecisionRequest, sent: tuple[str, ...]) -> bytes:
        """`payload` encoded by `JSON_BODY`, byte for byte; what is the same for every
        request with these labels (model, decision) is encoded once, not per request. A
        subclass with another `payload` encodes that one."""
        decision = request.decision
        key = (decision.name, decision.type, sent)
        middle = self._middles.get(key)
        if middle is None:
            shown = {"name": decision.name, "type": decision.type, "labels": list(sent)}
            middle = (f',"model":{JSON_BODY.encode(self.model)},'
                      f'"decision":{JSON_BODY.encode(shown)},"input":')
            if len(self._middles) >= MAX_KEPT_MIDDLES:
                self._middles.clear()
            self._middles[key] = middle
        text = (f"{_BODY_START}{JSON_BODY.encode(request.case_id)}{middle}"
                f"{JSON_BODY.encode(request.input)}}}")
        return text.encode()

    def parse(
        self, response: HttpResponse, request: DecisionRequest, sent: tuple[str, ...]
    ) -> Prediction:
        body = json_object(response)
        probabilities = body.get("probabilities")
        if not isinstance(probabilities, dict):
            raise InvalidResponse("response has no 'probabilities' object")
        for field in ("model", "model_version"):
            if body.get(field) is not None and not isinstance(body[field], str):
                raise InvalidResponse(f"response field '{field}' must be a string or null")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidResponse("response field 'metadata' must be an object or null")
        return Prediction(
            self.labels.from_backend(probabilities, request.decision.labels, sent),
            model=body.get("model") or self.model,
            model_version=body.get("model_version"),
            metadata=self.clean_metadata(metadata),
        )

    def clean_metadata(self, metadata: dict[str, Any] | None) -> dict[str, Any] | None:
        """Secret-like keys redacted, and any echoed credential value removed."""
        if metadata is None:
            return None
        cleaned: dict[str, Any] = scrub(mask_secret_keys(metadata), self.caller.secrets)
        return cleaned

    async def healthcheck(self) -> Health:
        if not self.health_url:
            return Health("unknown", "no health_url configured")
        return await self.caller.health(self.health_url)

    def details(self) -> dict[str, Any]:
        return {"url": public_url(self.url), "protocol": self.protocol}

    def call_identity(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model,
                "details": HttpBackend.details(self),
                "sent_to": sent_to(self.url, self.settings.headers or {})}

    def request_sent(self, request: DecisionRequest) -> Any:
        return self.payload(request, self.labels.to_backend(request.decision.labels))

    async def aclose(self) -> None:
        await self.caller.aclose()
