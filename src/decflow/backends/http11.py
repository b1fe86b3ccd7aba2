"""A small HTTP/1.1 client on an asyncio protocol, for the remote backends' hot path.

Why not httpx: on loopback with 64 requests in flight, httpx/httpcore spent ≈0.6 ms of CPU
per request in its connection-pool, h11 and anyio layers, which capped throughput at about a
quarter of the ideal on a 2-core machine; this client spends a small fraction of that
(bench/README.md). It covers what decision services need and nothing more: one request per
connection at a time with keep-alive, `Content-Length` request bodies, `Content-Length`,
chunked or read-to-close response bodies, TLS through `ssl`, no redirects, no proxies, no
compression (none is asked for).

Each connection is an `asyncio.BufferedProtocol` that parses the answer as its bytes arrive
and hands the whole response over through one future per request: no stream reader, no
task wake-up per read, and one timer per connection rather than one per request (it is
moved on, not cancelled and scheduled again, when the next request goes out). Bytes are
read into the connection's own buffer: a plain protocol's transport allocates 256 KiB per
read, which glibc maps and unmaps every time (three system calls and a page fault, ~35 us
of CPU per answer).

Limits: an answer's head (status line and headers, before the blank line), a chunk-size
line and a trailer line are at most `MAX_HEAD_BYTES`, a body at most `MAX_BODY_BYTES`.
`timeout_s` bounds the connect and, separately, each exchange (the request written and its
whole answer read).

Connections belong to the event loop that opened them; each loop using a pool gets its own
idle list, dropped with the loop.

Requests are never sent twice, with one exception. A kept-alive connection that the server
closed while it sat idle is noticed before reuse (its end of stream has arrived) and
dropped without sending anything; so is one on which the server sent bytes while nothing
was asked (a `408` before closing, say: they answer no request). If it closes in the
instant the request goes out (before any byte of an answer arrives), the request is sent
once more on a new connection: the server closed an idle connection and most likely never
read it (the stale-connection case, retried the same way by browsers and most HTTP
clients). Anything else that goes wrong after a request was written, on a new connection
or after the first byte of the answer, is a `ProtocolFailed` and is not retried here or by
the caller: the server may already have done the (paid) work.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20
MAX_IDLE_PER_ORIGIN = 256
RECEIVE_BYTES = 64 << 10  # read at most this much at a time (a buffer per connection)
# request heads kept ready per pool (one per method, URL and header set in use)
MAX_KEPT_HEADS = 64


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


Answer = tuple[HttpResponse, bool]  # the response, whether the connection can be reused


class _Connection(asyncio.BufferedProtocol):
    """One connection: the request in flight's answer is parsed in `data_received`, one
    step at a time (`_step`: the head, a body of known length, chunks, trailers, a body
    read to the close), and the whole response is the result of `answer`."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False  # ended by the server (end of stream, reset) or by this side
        self.buffer = bytearray()
        self.searched = 0  # bytes of `buffer` already searched for a line end
        self.answer: asyncio.Future[Answer] | None = None  # the exchange in flight
        self.method = ""
        self.reused = False
        self.answered = False  # a byte of the answer in flight arrived
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self._step: Callable[[], bool] = self._head
        self.status = 0
        self.headers: dict[str, str] = {}
        self.reusable = False
        self.needed = 0  # bytes of the body or chunk still to come
        self.parts: list[bytes] = []
        self.total = 0
        self.received: memoryview | None = None  # what the transport reads into
        self.last_head = b""  # the last answer's head as it came, and its parse
        self.last_parsed: _Head = (0, {}, False, TO_CLOSE)

    # -- asyncio.BufferedProtocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.received is None:
            self.received = memoryview(bytearray(RECEIVE_BYTES))
        return self.received

    def buffer_updated(self, nbytes: int) -> None:
        assert self.received is not None
        self.data_received(self.received[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """`data` arrived (copied: the transport reads into the same buffer next time)."""
        if self.answer is None:  # bytes that answer nothing: the connection is unusable
            self.close()
            return
        self.answered = True
        self.buffer += data
        try:
            while self.answer is not None and self._step():
                pass
        except ProtocolFailed as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # -- the exchange --------------------------------------------------------------------

    def closed_by_peer(self) -> bool:
        """Whether the server ended, reset or spoke on the connection while it was idle."""
        return self.closed

    def exchange(self, message: bytes, method: str, reused: bool) -> asyncio.Future[Answer]:
        """Write the request; the future's result is its answer, or its exception is
        `ProtocolFailed`, `TimedOut` or (`reused` only) `_StaleConnection`."""
        assert self.transport is not None
        answer = self.answer = self.loop.create_future()
        self.method, self.reused, self.answered = method, reused, False
        self._step = self._head
        self.deadline = self.loop.time() + self.timeout_s
        if self.timer is None:
            self.timer = self.loop.call_at(self.deadline, self._expire)
        self.transport.write(message)
        return answer

    def close(self) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.close()

    def _expire(self) -> None:
        """The timer: an exchange still in flight at its deadline has timed out; one that
        began after the timer was set is checked again at its own deadline."""
        self.timer = None
        if self.answer is None:
            return  # idle: the next exchange sets the timer again
        if self.loop.time() < self.deadline:
            self.timer = self.loop.call_at(self.deadline, self._expire)
            return
        self._fail(TimedOut())

    def _ended(self, exc: Exception | None) -> None:
        """The server closed or reset the connection; an answer read to the close is
        complete, any other answer in flight has failed."""
        self.closed = True
        if self.answer is None:
            return
        if self._step == self._to_close and exc is None:
            self._finish(b"".join(self.parts), reusable=False)
        elif not self.answered:
            self._fail(_StaleConnection() if self.reused else ProtocolFailed(
                "server closed the connection without answering"))
        else:
            self._fail(ProtocolFailed("the connection ended inside the answer"))

    def _finish(self, body: bytes, reusable: bool) -> None:
        answer, self.answer = self.answer, None
        # bytes past the answer answer nothing: such a connection is not used again
        reusable = reusable and not self.buffer
        if answer is not None and not answer.done():
            answer.set_result((HttpResponse(self.status, self.headers, body), reusable))

    def _fail(self, error: BaseException) -> None:
        answer, self.answer = self.answer, None
        self.close()
        if answer is not None and not answer.done():
            answer.set_exception(error)

    # -- the answer's parts (each returns whether it took something from the buffer) ------

    def _line(self, end: bytes) -> bytes | None:
        """The buffer's first line up to `end` (taken off, without `end`), or None until it
        has arrived."""
        found = self.buffer.find(end, max(0, self.searched - len(end) + 1))
        if found < 0 or found > MAX_HEAD_BYTES:
            if found > MAX_HEAD_BYTES or len(self.buffer) > MAX_HEAD_BYTES + len(end):
                raise ProtocolFailed("answer head or line too long")
            self.searched = len(self.buffer)
            return None
        line = bytes(self.buffer[:found])
        del self.buffer[: found + len(end)]
        self.searched = 0
        return line

    def _head(self) -> bool:
        raw = self._line(b"\r\n\r\n")
        if raw is None:
            return False
        if raw == self.last_head:  # a server sends much the same head every time
            head = self.last_parsed
        else:
            head = self.last_parsed = _parse_head(raw)
            self.last_head = raw
        status, headers, reusable, framing = head
        if status < 200:
            return True  # 1xx interim responses (100, 103) precede the real one
        # each response its own headers (the parse is kept for the next answer)
        self.status, self.headers, self.reusable = status, dict(headers), reusable
        self.parts, self.total = [], 0
        if self.method == "HEAD" or status in (204, 304):
            self._finish(b"", reusable)
        elif framing == CHUNKED:
            self._step = self._chunk_size
        elif framing == TO_CLOSE:  # neither length nor chunks: the body ends at the close
            self._step = self._to_close
        elif framing == BAD_LENGTH:
            raise ProtocolFailed("bad Content-Length")
        else:
            self.needed = framing
            self._step = self._sized
        return True

    def _sized(self) -> bool:
        needed = self.needed
        if len(self.buffer) < needed:
            return False
        body = bytes(self.buffer[:needed])
        del self.buffer[:needed]
        self._finish(body, self.reusable)
        return True

    def _chunk_size(self) -> bool:
        line = self._line(b"\r\n")
        if line is None:
            return False
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolFailed("malformed chunk size") from None
        if size < 0:
            raise ProtocolFailed("malformed chunk size")
        if size == 0:
            self._step = self._trailer
            return True
        self.total += size
        if self.total > MAX_BODY_BYTES:
            raise ProtocolFailed("response body too large")
        self.needed = size
        self._step = self._chunk
        return True

    def _chunk(self) -> bool:
        size = self.needed
        if len(self.buffer) < size + 2:
            return False
        if self.buffer[size:size + 2] != b"\r\n":
            raise ProtocolFailed("malformed chunk")
        self.parts.append(bytes(self.buffer[:size]))
        del self.buffer[:size + 2]
        self._step = self._chunk_size
        return True

    def _trailer(self) -> bool:
        line = self._line(b"\r\n")
        if line is None:
            return False
        if not line:  # the blank line after the trailers (if any)
            self._finish(b"".join(self.parts), self.reusable)
        return True

    def _to_close(self) -> bool:
        self.total += len(self.buffer)
        if self.total > MAX_BODY_BYTES:
            raise ProtocolFailed("response body too large")
        self.parts.append(bytes(self.buffer))
        self.buffer.clear()
        return False


class Http11Pool:
    """Keep-alive connections per (scheme, host, port), reused most recently used first."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._context: ssl.SSLContext | None = None
        self._idle: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[bool, str, int], list[_Connection]]
        ] = weakref.WeakKeyDictionary()
        self._heads: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], bytes] = {}

    def _idle_list(self, target: Target) -> list[_Connection]:
        by_origin = self._idle.setdefault(asyncio.get_running_loop(), {})
        return by_origin.setdefault((target.secure, target.host, target.port), [])

    async def _connect(self, target: Target) -> _Connection:
        context = None
        if target.secure:
            if self._context is None:
                self._context = ssl.create_default_context()
            context = self._context
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self.timeout_s), target.host, target.port, ssl=context
                )
        except TimeoutError:
            raise ConnectTimedOut() from None
        except OSError as exc:  # refused, unreachable, name resolution, TLS
            raise ConnectFailed(str(exc)) from None
        return connection

    def _head(self, method: str, target: Target, headers: Mapping[str, str]) -> bytes:
        """The request's head up to its `Content-Length` value (the same for every request
        with these headers: made once)."""
        key = (method, target.authority, target.path, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.authority}"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            if len(self._heads) >= MAX_KEPT_HEADS:
                self._heads.clear()
            self._heads[key] = head
        return head

    async def request(
        self, method: str, target: Target, headers: Mapping[str, str], body: bytes | None
    ) -> HttpResponse:
        head = self._head(method, target, headers)
        if body is None:
            message = head + b"\r\n"
        else:
            message = b"".join((head, b"Content-Length: ", b"%d" % len(body), b"\r\n\r\n", body))
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
            response, reusable = await connection.exchange(message, method, reused)
        except BaseException:  # a failure, a timeout, a cancellation (Ctrl-C)
            connection.close()
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


# How an answer's body is framed (`_Head`): chunks, to the close, a `Content-Length` that
# is no length (an error only where a body follows), or its length (>= 0).
CHUNKED = -1
TO_CLOSE = -2
BAD_LENGTH = -3
# an answer's head parsed: status, headers (names lower-cased), whether the connection
# stays open after it, and its body's framing
_Head = tuple[int, dict[str, str], bool, int]


def _parse_head(raw: bytes) -> _Head:
    """An answer's status line and headers (`raw`, without the blank line), or
    ProtocolFailed."""
    status_line, *lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not _digits(code, 3):
        raise ProtocolFailed("malformed status line")
    status = int(code)
    headers: dict[str, str] = {}
    if status < 200:
        return status, headers, True, TO_CLOSE
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolFailed("malformed header line")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    connection_tokens = headers.get("connection", "").lower()
    reusable = "close" not in connection_tokens and (
        version != "HTTP/1.0" or "keep-alive" in connection_tokens
    )
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, headers, reusable, CHUNKED
    if "content-length" in headers:
        length = headers["content-length"]
        if not _digits(length, 18) or int(length) > MAX_BODY_BYTES:
            return status, headers, reusable, BAD_LENGTH
        return status, headers, reusable, int(length)
    return status, headers, reusable, TO_CLOSE


def _digits(text: str, limit: int) -> bool:
    """ASCII decimal digits only, at most `limit` of them (`isdigit` alone accepts `²`)."""
    return text.isascii() and text.isdigit() and len(text) <= limit
