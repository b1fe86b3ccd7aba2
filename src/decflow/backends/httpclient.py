"""Shared HTTP plumbing for the remote backends (http, systemone, openai).

One `HttpCaller` per configured backend owns a keep-alive connection pool (`http11`), the
retry policy, the headers (static, from the environment, bearer token) and the mapping of
HTTP outcomes to per-case error kinds:

| outcome | kind |
| --- | --- |
| 2xx | the response is returned |
| a retryable status (502/503/504, plus the provider's extras) after the retries | unavailable |
| any other non-2xx (including 3xx: redirects are not followed) | backend_error |
| connection refused / other connect failure after the retries | unavailable |
| connect timeout after the retries | timeout |
| no complete response within `timeout_s` after connecting (never retried) | timeout |
| any other transport error (never retried) | unavailable |

"Never retried" because the request may have reached the server, which may already have
done the (paid) work. The one exception lives in `http11`: a request on a reused
keep-alive connection that the server closed before sending any byte of an answer (the
stale-connection race) is sent once more on a new connection, without counting as a retry.

Response bodies never enter error messages (they may echo credentials or user data).
`timeout_s` bounds the connect and, separately, the whole exchange (send the request, read
the full response): stricter than a per-read timeout, and what "timed out after 30s" means
to a user. Credential values are read from the environment on first use and remembered
only to scrub them from anything a server echoes back; they are sent only to origins the
environment allows (`DECFLOW_ALLOW_CREDENTIALS`), checked before every request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from decflow.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Health,
    InvalidResponse,
)
from decflow.backends.http11 import (
    ConnectFailed,
    ConnectTimedOut,
    Http11Pool,
    HttpResponse,
    Target,
    TimedOut,
    TransportError,
)
from decflow.contracts.credentials import is_allowed, origin, refusal
from decflow.data.bounds import MAX_JSON_VALUES
from decflow.errors import ConfigurationError
from decflow.redaction import register
from decflow.strictjson import JsonProblem, loads, loads_object, values_over
from decflow.textfile import TextProblem, decode_utf8
from decflow.version import __version__

USER_AGENT = f"decflow/{__version__}"
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
# The JSON text of request bodies (UTF-8 encoded when sent); built once (`json.dumps` with
# options builds an encoder per call). Its output for an object is the concatenation of its
# parts' outputs, so a body can be assembled from parts encoded ahead (`HttpBackend.body`).
JSON_BODY = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))



def public_url(url: str) -> str:
    """The URL without query and fragment, as stored in reports and error messages."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def origin_url(url: str) -> str:
    """`scheme://host:port` of a URL (where a server's own endpoints such as `/props` are)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _seconds(value: float) -> str:
    return f"{value:g}s"


class HttpCaller:
    """Sends requests for one backend with its headers, credentials and retry policy.

    `retry_statuses` are retried like connection failures (after `retry_backoff_s * 2**n`);
    when they persist, `unavailable_statuses` become `unavailable`, others `backend_error`.
    """

    def __init__(
        self,
        *,
        provider: str,
        backend_name: str,
        timeout_s: float,
        max_retries: int,
        retry_backoff_s: float,
        headers: Mapping[str, str] | None = None,
        headers_from_env: Mapping[str, str] | None = None,
        bearer_token_env: str | None = None,
        retry_statuses: Collection[int] = UNAVAILABLE_STATUSES,
        unavailable_statuses: Collection[int] = UNAVAILABLE_STATUSES,
        pool: Http11Pool | None = None,
        owner: str | None = None,
    ) -> None:
        """`owner` names the caller in configuration errors (default: the backend)."""
        self.provider = provider
        self.backend_name = backend_name
        self.owner = owner or f"{provider} backend '{backend_name}'"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.retry_statuses = frozenset(retry_statuses)
        self.unavailable_statuses = frozenset(unavailable_statuses)
        self._static_headers = dict(headers or {})
        self._env_headers = dict(headers_from_env or {})
        self._bearer_env = bearer_token_env
        self._headers: dict[str, str] | None = None
        self._json_headers: dict[str, str] | None = None
        # the environment variables whose values are sent: credentials
        self._credential_variables = (*self._env_headers.values(),
                                      *([bearer_token_env] if bearer_token_env else []))
        self._secrets: tuple[str, ...] = ()
        self._allowed_origins: set[tuple[str, str, int | None]] = set()
        self.pool = pool or Http11Pool(timeout_s)
        self._targets: dict[str, Target] = {}

    # -- credentials -------------------------------------------------------------------

    def _check_origin(self, url: str) -> None:
        """Refuse (exit 2) to send credentials to an origin the environment does not allow
        (`decflow.contracts.credentials`), before the request and before reading them."""
        if not self._credential_variables or origin(url) in self._allowed_origins:
            return
        for variable in self._credential_variables:
            if not is_allowed(variable, url):
                raise ConfigurationError(
                    refusal(variable, url, self.owner))
        self._allowed_origins.add(origin(url))

    def _env(self, variable: str) -> str:
        value = os.environ.get(variable, "")
        where = f"{self.owner}: environment variable {variable}"
        if not value:
            raise ConfigurationError(f"{where} is not set")
        if any(c in value for c in "\r\n\0"):
            # A line break would end the header and let the value inject others.
            raise ConfigurationError(f"{where} contains a line break or NUL character")
        return value

    def headers(self) -> dict[str, str]:
        """All request headers; credentials are read from the environment on first use."""
        if self._headers is None:
            headers = {
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                **self._static_headers,
            }
            secrets = []
            for header, variable in self._env_headers.items():
                headers[header] = self._env(variable)
                secrets.append(headers[header])
            if self._bearer_env:
                token = self._env(self._bearer_env)
                headers["Authorization"] = f"Bearer {token}"
                secrets.append(token)
            self._secrets = tuple(secrets)
            register(self._secrets)
            self._headers = headers
        return self._headers

    @property
    def secrets(self) -> tuple[str, ...]:
        """Credential values read so far (for scrubbing anything a server echoes back)."""
        return self._secrets

    # -- calls -------------------------------------------------------------------------

    async def post_json(self, url: str, payload: Any) -> HttpResponse:
        return await self.post_encoded(url, JSON_BODY.encode(payload).encode())

    async def post_encoded(self, url: str, body: bytes) -> HttpResponse:
        """POST a JSON body already encoded (UTF-8 text as `JSON_BODY` makes it)."""
        self._check_origin(url)
        if self._json_headers is None:
            self._json_headers = {**self.headers(), "Content-Type": "application/json"}
        return await self._send("POST", url, self._json_headers, body)

    async def get(self, url: str) -> HttpResponse:
        self._check_origin(url)
        return await self._send("GET", url, self.headers(), None)

    async def health(self, url: str) -> Health:
        """GET `url`: any 2xx is ok, anything else (status or transport failure) unhealthy."""
        try:
            response = await self.get(url)
        except BackendError as exc:
            return Health("unhealthy", f"{public_url(url)}: {exc}")
        return Health("ok", f"{public_url(url)} returned HTTP {response.status}")

    async def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> HttpResponse:
        attempt = 0
        while True:
            failure = await self._attempt(method, url, headers, body)
            if isinstance(failure, HttpResponse):
                return failure
            retryable, error = failure
            if not retryable or attempt >= self.max_retries:
                raise error
            await asyncio.sleep(self.retry_backoff_s * 2**attempt)
            attempt += 1

    async def _attempt(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> HttpResponse | tuple[bool, BackendError]:
        """One try: the 2xx response, or (retryable?, the error it would end as)."""
        target = self._targets.get(url) or self._targets.setdefault(url, Target.parse(url))
        try:
            response = await self.pool.request(method, target, headers, body)
        except ConnectTimedOut:
            return True, BackendTimeout(f"connect timed out after {_seconds(self.timeout_s)}")
        except TimedOut:
            return False, BackendTimeout(f"timed out after {_seconds(self.timeout_s)}")
        except ConnectFailed:
            return True, BackendUnavailable(f"cannot connect to {public_url(url)}: ConnectError")
        except TransportError as exc:
            return False, BackendUnavailable(f"request to {public_url(url)} failed: {exc.name}")
        status = response.status
        if 200 <= status < 300:
            return response
        message = f"returned HTTP {status}"
        error = (BackendUnavailable if status in self.unavailable_statuses else BackendError)(
            message
        )
        error.status = status
        return status in self.retry_statuses, error

    async def aclose(self) -> None:
        await self.pool.aclose()


def json_object(response: HttpResponse) -> dict[str, Any]:
    """The body as a JSON object, or InvalidResponse naming the place of the problem.

    Strict (`decflow.strictjson`): UTF-8 only, no duplicate keys, NaN, Infinity, numbers
    that overflow a float, nesting deeper than 100 levels or more than `MAX_JSON_VALUES`
    values, so an answer that would crash a later step (a 100,000-level `metadata`) or
    take gigabytes (60 MB of empty lists) is `invalid_response` here, unparsed.
    """
    if found := values_over(response.content, MAX_JSON_VALUES):  # before decoding it
        raise InvalidResponse(f"response is not read: up to {found:,} JSON values; at most "
                              f"{MAX_JSON_VALUES:,} are read (SECURITY.md)")
    body = loads_object(response.content)  # the common answer, parsed fast
    if body is None:
        try:
            body = loads(decode_utf8(response.content))
        except (TextProblem, JsonProblem) as exc:
            raise InvalidResponse(f"response is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidResponse("response body is not a JSON object")
    return body


def scrub(value: Any, secrets: Collection[str]) -> Any:
    """Replace any string containing a credential value with `[REDACTED]`, recursively."""
    if not secrets:
        return value
    if isinstance(value, str):
        return "[REDACTED]" if any(secret in value for secret in secrets) else value
    if isinstance(value, Mapping):
        return {scrub(key, secrets): scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, secrets) for item in value]
    return value
