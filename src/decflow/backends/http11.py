"""A small HTTP/1.1 client on asyncio streams, for the remote backends' hot path.

Why not httpx: on loopback with 64 requests in flight, httpx/httpcore spent ≈0.6 ms of CPU
per request in its connection-pool, h11 and anyio layers, which capped throughput at about a
quarter of the ideal on a 2-core machine; this client spends ≈0.07 ms (bench/README.md).
It covers what decision services need and nothing more: one request per connection at a
time with keep-alive, `Content-Length` request bodies, `Content-Length`, chunked or
read-to-close response bodies, TLS through `ssl`, no redirects, no proxies, no
compression (none is asked for).

Connections belong to the event loop that opened them; each loop using a pool gets its own
idle list, dropped with the loop.

Requests are never sent twice, with one exception. A kept-alive connection that the server
closed while it sat idle is noticed before reuse (its end of stream has arrived) and
dropped without sending anything. If it closes in the instant the request goes out
(before any byte of an answer arrives), the request is sent once more on a new connection:
the server closed an idle connection and most likely never read it (the stale-connection
case, retried the same way by browsers and most HTTP clients). Anything else that goes
wrong after a request was written, on a new connection or after the first byte of the
answer, is a `ProtocolFailed` and is not retried here or by the caller: the server may
already have done the (paid) work.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20
MAX_IDLE_PER_ORIGIN = 256


class TransportError(Exception):
    """A failure below HTTP; `name` is what error messages show (`ConnectError`, ...)."""

    name = "TransportError"


class ConnectFailed(TransportError):
    name = "ConnectError"


class ConnectTimedOut(TransportError):
    name = "ConnectTimeout"


class TimedOut(TransportError):
    name = "ReadTimeout"


class ProtocolFailed(TransportError):
    name = "RemoteProtocolError"


class _StaleConnection(Exception):
    """A reused keep-alive connection closed by the server before any byte of an answer."""


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed request URL."""

    secure: bool
    host: str
    port: int
    authority: str  # the Host header
    path: str  # path and query

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an absolute http(s) URL: {url}")
        secure = parts.scheme == "https"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        port = parts.port or (443 if secure else 80)
        return cls(secure, parts.hostname, port, parts.netloc, path)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An HTTP answer: status, headers and the whole body."""

    status: int
    headers: Mapping[str, str]  # names lower-cased
    content: bytes


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    def closed_by_peer(self) -> bool:
        """Whether the server ended or reset the connection while it was idle."""
        return self.reader.at_eof() or self.reader.exception() is not None


class Http11Pool:
    """Keep-alive connections per (scheme, host, port), reused most recently used first."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._context: ssl.SSLContext | None = None
        self._idle: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[bool, str, int], list[_Connection]]
        ] = weakref.WeakKeyDictionary()

    def _idle_list(self, target: Target) -> list[_Connection]:
        by_origin = self._idle.setdefault(asyncio.get_running_loop(), {})
        return by_origin.setdefault((target.secure, target.host, target.port), [])

    async def _connect(self, target: Target) -> _Connection:
        context = None
        if target.secure:
            if self._context is None:
                self._context = ssl.create_default_context()
            context = self._context
        try:
            async with asyncio.timeout(self.timeout_s):
                reader, writer = await asyncio.open_connection(
                    target.host, target.port, ssl=context, limit=MAX_HEAD_BYTES
                )
        except TimeoutError:
            raise ConnectTimedOut() from None
        except OSError as exc:  # refused, unreachable, name resolution, TLS
            raise ConnectFailed(str(exc)) from None
        return _Connection(reader, writer)

    async def request(
        self, method: str, target: Target, headers: Mapping[str, str], body: bytes | None
    ) -> HttpResponse:
        head = [f"{method} {target.path} HTTP/1.1", f"Host: {target.authority}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            head.append(f"Content-Length: {len(body)}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        idle = self._idle_list(target)
        connection = _take_open(idle)
        if connection is not None:
            try:
                return await self._exchange(connection, message, method, idle, reused=True)
            except _StaleConnection:
                pass  # closed as the request went out, before any answer: send it once more
        connection = await self._connect(target)
        return await self._exchange(connection, message, method, idle, reused=False)

    async def _exchange(
        self,
        connection: _Connection,
        message: bytes,
        method: str,
        idle: list[_Connection],
        reused: bool,
    ) -> HttpResponse:
        try:
            async with asyncio.timeout(self.timeout_s):
                first = await _send(connection, message, reused)
                response, reusable = await _read_response(connection.reader, first, method)
        except BaseException as exc:
            connection.close()
            if isinstance(exc, TimeoutError):
                raise TimedOut() from None
            if isinstance(exc, OSError | EOFError | asyncio.LimitOverrunError | ValueError):
                raise ProtocolFailed(type(exc).__name__) from None
            raise
        if reusable and len(idle) < MAX_IDLE_PER_ORIGIN:
            idle.append(connection)
        else:
            connection.close()
        return response

    async def aclose(self) -> None:
        """Close this loop's idle connections (those of finished loops went with them)."""
        by_origin = self._idle.pop(asyncio.get_running_loop(), {})
        for connections in by_origin.values():
            for connection in connections:
                connection.close()
        await asyncio.sleep(0)  # let the transports finish closing


def _take_open(idle: list[_Connection]) -> _Connection | None:
    """The most recently used idle connection the server has not closed (closed ones are
    dropped: nothing was sent on them)."""
    while idle:
        connection = idle.pop()
        if not connection.closed_by_peer():
            return connection
        connection.close()
    return None


async def _send(connection: _Connection, message: bytes, reused: bool) -> bytes:
    """Write the request and wait for the first byte of the answer.

    On a reused connection, a close or reset before that byte is `_StaleConnection`; on a
    new connection it is a failure like any other.
    """
    try:
        connection.writer.write(message)
        await connection.writer.drain()
        first = await connection.reader.read(1)
    except ConnectionError:
        if reused:
            raise _StaleConnection() from None
        raise
    if not first:
        if reused:
            raise _StaleConnection()
        raise ProtocolFailed("server closed the connection without answering")
    return first


def _digits(text: str, limit: int) -> bool:
    """ASCII decimal digits only, at most `limit` of them (`isdigit` alone accepts `²`)."""
    return text.isascii() and text.isdigit() and len(text) <= limit


async def _read_response(
    reader: asyncio.StreamReader, first: bytes, method: str
) -> tuple[HttpResponse, bool]:
    """(response, whether the connection can be reused); `first` is its first byte."""
    while True:
        raw = first + await reader.readuntil(b"\r\n\r\n")
        first = b""
        status_line, *lines = raw[:-4].decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not _digits(code, 3):
            raise ProtocolFailed("malformed status line")
        status = int(code)
        if status >= 200:
            break  # 1xx interim responses (100, 103) precede the real one
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolFailed("malformed header line")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    connection_tokens = headers.get("connection", "").lower()
    reusable = "close" not in connection_tokens and (
        version != "HTTP/1.0" or "keep-alive" in connection_tokens
    )
    if method == "HEAD" or status in (204, 304):
        return HttpResponse(status, headers, b""), reusable
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return HttpResponse(status, headers, await _read_chunked(reader)), reusable
    if "content-length" in headers:
        length = headers["content-length"]
        if not _digits(length, 18) or int(length) > MAX_BODY_BYTES:
            raise ProtocolFailed("bad Content-Length")
        return HttpResponse(status, headers, await reader.readexactly(int(length))), reusable
    # Neither length nor chunks: the body ends when the server closes the connection.
    parts: list[bytes] = []
    total = 0
    while chunk := await reader.read(1 << 16):
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise ProtocolFailed("response body too large")
        parts.append(chunk)
    return HttpResponse(status, headers, b"".join(parts)), False


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = (await reader.readuntil(b"\r\n"))[:-2].split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise ProtocolFailed("malformed chunk size") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        total += size
        if total > MAX_BODY_BYTES:
            raise ProtocolFailed("response body too large")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ProtocolFailed("malformed chunk")
