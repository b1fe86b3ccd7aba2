"""Shared HTTP plumbing for the remote backends (http, systemone, openai).

One `HttpCaller` per configured backend owns a small pool of `httpx.AsyncClient`s, the
retry policy, the headers (static, from the environment, bearer token) and the mapping of
HTTP outcomes to per-case error kinds:

| outcome | kind |
| --- | --- |
| 2xx | the response is returned |
| a retryable status (502/503/504, plus the provider's extras) after the retries | unavailable |
| any other non-2xx (including 3xx: redirects are not followed) | backend_error |
| connection refused / other connect failure after the retries | unavailable |
| connect timeout after the retries | timeout |
| read/write timeout (never retried) | timeout |
| any other transport error | unavailable |

Response bodies never enter error messages (they may echo credentials or user data).

Why one transport per connection: one pool with 64 connections spends most of its CPU in
httpcore's pool bookkeeping (every request scans every connection and queued request);
64 single-connection pools removed that bottleneck (numbers in `bench/README.md`).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import weakref
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from decflow import __version__
from decflow.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    Health,
    InvalidResponse,
)
from decflow.errors import ConfigurationError

USER_AGENT = f"decflow/{__version__}"
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})

# Connections per backend, chosen with bench/http_throughput.py (see bench/README.md).
DEFAULT_CONNECTIONS = 64


def public_url(url: str) -> str:
    """The URL without query and fragment, as stored in reports and error messages."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _seconds(value: float) -> str:
    return f"{value:g}s"


class _Connections:
    """The transports of one event loop, with their in-flight counts."""

    def __init__(self, size: int, context: ssl.SSLContext) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self.transports = [
            httpx.AsyncHTTPTransport(verify=context, limits=limits) for _ in range(size)
        ]
        self.in_flight = [0] * size
        self.idle = list(range(size - 1, -1, -1))
        self.turn = 0

    def take(self) -> int:
        if self.idle:
            index = self.idle.pop()
        else:
            index, self.turn = self.turn, (self.turn + 1) % len(self.transports)
        self.in_flight[index] += 1
        return index

    def give_back(self, index: int) -> None:
        self.in_flight[index] -= 1
        if not self.in_flight[index]:
            self.idle.append(index)


class ClientPool:
    """Single-connection httpx transports; a request takes an idle one (most recently used
    first, so a low concurrency keeps few connections open), else the next in turn.

    Transports are used directly (not through `AsyncClient`): decflow needs none of the
    client layer (cookies, auth flows, redirects, proxies from the environment), and
    skipping it saves about a quarter of the per-request CPU time. Connections belong to
    an event loop, so each loop that uses the pool (shards run with their own
    `asyncio.run`, possibly in threads) gets its own set, dropped with the loop.
    """

    def __init__(self, timeout_s: float, size: int = DEFAULT_CONNECTIONS) -> None:
        self.size = size
        self.timeout = {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": None}
        self._context: ssl.SSLContext | None = None
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Connections] = (
            weakref.WeakKeyDictionary()
        )

    def _connections(self) -> _Connections:
        loop = asyncio.get_running_loop()
        connections = self._by_loop.get(loop)
        if connections is None:
            if self._context is None:
                # One TLS context for every transport: creating one costs ~10 ms.
                self._context = ssl.create_default_context()
            connections = self._by_loop[loop] = _Connections(self.size, self._context)
        return connections

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send and read the whole body (timeouts apply to connect, each read and write)."""
        connections = self._connections()
        index = connections.take()
        request.extensions["timeout"] = self.timeout
        try:
            response = await connections.transports[index].handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
            return response
        finally:
            connections.give_back(index)

    async def aclose(self) -> None:
        """Close this loop's connections (those of finished loops went with them)."""
        connections = self._by_loop.pop(asyncio.get_running_loop(), None)
        if connections is not None:
            await asyncio.gather(*(t.aclose() for t in connections.transports))


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
        pool: ClientPool | None = None,
    ) -> None:
        self.provider = provider
        self.backend_name = backend_name
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.retry_statuses = frozenset(retry_statuses)
        self.unavailable_statuses = frozenset(unavailable_statuses)
        self._static_headers = dict(headers or {})
        self._env_headers = dict(headers_from_env or {})
        self._bearer_env = bearer_token_env
        self._headers: dict[str, str] | None = None
        self._secrets: tuple[str, ...] = ()
        self.pool = pool or ClientPool(timeout_s)
        self._urls: dict[str, httpx.URL] = {}  # parsed once: ~15 µs a request saved

    # -- credentials -------------------------------------------------------------------

    def _env(self, variable: str) -> str:
        value = os.environ.get(variable, "")
        if not value:
            raise ConfigurationError(
                f"{self.provider} backend '{self.backend_name}': environment variable "
                f"{variable} is not set"
            )
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
            self._headers = headers
        return self._headers

    @property
    def secrets(self) -> tuple[str, ...]:
        """Credential values read so far (for scrubbing anything a server echoes back)."""
        return self._secrets

    # -- calls -------------------------------------------------------------------------

    async def post_json(self, url: str, payload: Any) -> httpx.Response:
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {**self.headers(), "Content-Type": "application/json"}
        return await self._send("POST", url, headers, body)

    async def get(self, url: str) -> httpx.Response:
        return await self._send("GET", url, self.headers(), None)

    async def health(self, url: str) -> Health:
        """GET `url`: any 2xx is ok, anything else (status or transport failure) unhealthy."""
        try:
            response = await self.get(url)
        except BackendError as exc:
            return Health("unhealthy", f"{public_url(url)}: {exc}")
        return Health("ok", f"{public_url(url)} returned HTTP {response.status_code}")

    async def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> httpx.Response:
        attempt = 0
        while True:
            failure = await self._attempt(method, url, headers, body)
            if isinstance(failure, httpx.Response):
                return failure
            retryable, error = failure
            if not retryable or attempt >= self.max_retries:
                raise error
            await asyncio.sleep(self.retry_backoff_s * 2**attempt)
            attempt += 1

    async def _attempt(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> httpx.Response | tuple[bool, BackendError]:
        """One try: the 2xx response, or (retryable?, the error it would end as)."""
        try:
            parsed = self._urls.get(url) or self._urls.setdefault(url, httpx.URL(url))
            response = await self.pool.send(
                httpx.Request(method, parsed, headers=headers, content=body)
            )
        except httpx.ConnectTimeout:
            return True, BackendTimeout(f"connect timed out after {_seconds(self.timeout_s)}")
        except httpx.TimeoutException:
            return False, BackendTimeout(f"timed out after {_seconds(self.timeout_s)}")
        except httpx.ConnectError:
            return True, BackendUnavailable(f"cannot connect to {public_url(url)}: ConnectError")
        except httpx.TransportError as exc:
            return False, BackendUnavailable(
                f"request to {public_url(url)} failed: {type(exc).__name__}"
            )
        status = response.status_code
        if 200 <= status < 300:
            return response
        message = f"returned HTTP {status}"
        if status in self.unavailable_statuses:
            return status in self.retry_statuses, BackendUnavailable(message)
        return status in self.retry_statuses, BackendError(message)

    async def aclose(self) -> None:
        await self.pool.aclose()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The body as a JSON object (strict: NaN/Infinity are rejected) or InvalidResponse."""
    try:
        body = json.loads(response.content, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        raise InvalidResponse("response is not valid JSON") from None
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
