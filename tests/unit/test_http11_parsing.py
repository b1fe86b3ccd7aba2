"""The HTTP/1.1 client's answer parsing (`http11._Connection`), fed bytes directly: however
the answer is cut into pieces by the network, the same response comes out, and the limits
hold at their bounds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from decflow.backends import http11
from decflow.backends.http11 import HttpResponse, ProtocolFailed

BODY = b'{"ok": true}'
SIZED = b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX-A: 1\r\nx-a: 2\r\n\r\n" + BODY
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;ext=1\r\n{\"ok\"\r\n7\r\n: true}\r\n0\r\nX-Trailer: y\r\n\r\n")
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + SIZED
TO_CLOSE = b"HTTP/1.1 200 OK\r\n\r\n" + BODY


class _Transport(asyncio.Transport):
    """Records what is written; closing it ends the connection as asyncio's would."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing


def exchange(pieces: Iterable[bytes], *, eof: bool = False, method: str = "POST",
             reused: bool = False) -> tuple[HttpResponse, bool]:
    """The answer made of `pieces` (then the end of stream with `eof`) to one request."""

    async def scenario() -> tuple[HttpResponse, bool]:
        connection = http11._Connection(5.0)
        connection.connection_made(_Transport())
        answer = connection.exchange(b"request", method, reused)
        for piece in pieces:
            connection.data_received(piece)
        if eof:
            connection.eof_received()
            connection.connection_lost(None)
        return await asyncio.wait_for(answer, 1)

    return asyncio.run(scenario())


def byte_by_byte(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


@pytest.mark.parametrize("data", [SIZED, CHUNKED, INTERIM], ids=["sized", "chunked", "1xx"])
def test_an_answer_cut_anywhere_parses_the_same(data: bytes) -> None:
    whole, reusable = exchange([data])
    assert whole.status == 200 and whole.content == BODY and reusable
    assert exchange(byte_by_byte(data)) == (whole, reusable)
    for cut in range(1, len(data)):
        assert exchange([data[:cut], data[cut:]]) == (whole, reusable)


def test_repeated_headers_are_joined_and_names_lower_cased() -> None:
    response, _ = exchange([SIZED])
    assert response.headers == {"content-length": "12", "x-a": "1, 2"}


def test_a_body_read_to_the_close_ends_with_the_stream_and_is_not_reused() -> None:
    assert exchange(byte_by_byte(TO_CLOSE), eof=True) == (
        HttpResponse(200, {}, BODY), False)


@pytest.mark.parametrize("data, reusable", [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 408 Timeout\r\n\r\n", False),
])
def test_which_connections_are_kept(data: bytes, reusable: bool) -> None:
    assert exchange([data])[1] is reusable


def test_head_204_and_304_answers_have_no_body() -> None:
    assert exchange([b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"], method="HEAD") == (
        HttpResponse(200, {"content-length": "12"}, b""), True)
    for status in (b"204 No Content", b"304 Not Modified"):
        response, reusable = exchange([b"HTTP/1.1 " + status + b"\r\n\r\n"])
        assert response.content == b"" and reusable


def test_an_end_before_any_byte_is_stale_only_on_a_reused_connection() -> None:
    with pytest.raises(http11._StaleConnection):
        exchange([], eof=True, reused=True)
    with pytest.raises(ProtocolFailed):
        exchange([], eof=True, reused=False)
    with pytest.raises(ProtocolFailed):  # a byte arrived: never sent again
        exchange([b"H"], eof=True, reused=True)


def test_an_end_inside_a_sized_or_chunked_body_fails() -> None:
    for data in (SIZED[:-1], CHUNKED[:-2]):
        with pytest.raises(ProtocolFailed):
            exchange([data], eof=True)


def test_head_and_line_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http11, "MAX_HEAD_BYTES", 64)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: "
    at_limit = head + b"a" * (64 - len(head)) + b"\r\n\r\n"
    assert exchange(byte_by_byte(at_limit))[0].status == 200
    for data in (head + b"a" * (65 - len(head)) + b"\r\n\r\n",  # one byte over
                 head + b"a" * 200):  # no end in sight
        with pytest.raises(ProtocolFailed):
            exchange([data])
        with pytest.raises(ProtocolFailed):
            exchange(byte_by_byte(data))
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with pytest.raises(ProtocolFailed):  # a chunk-size line is a line too
        exchange([chunked + b"1;" + b"x" * 100 + b"\r\na\r\n0\r\n\r\n"])


def test_body_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http11, "MAX_BODY_BYTES", 12)
    assert exchange([SIZED])[0].content == BODY  # exactly at the limit
    assert exchange([TO_CLOSE], eof=True)[0].content == BODY
    chunked_13 = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"6\r\n{\"ok\":\r\n7\r\n true}\n\r\n0\r\n\r\n")
    too_long = [b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + BODY + b"\n",
                chunked_13, TO_CLOSE + b"\n"]
    for data in too_long:
        with pytest.raises(ProtocolFailed):
            exchange([data], eof=True)


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    b"HTTP/2 200 OK\r\n\r\n",
    b"HTTP/1.1 20 OK\r\n\r\n",
])
def test_malformed_chunks_and_status_lines_fail(data: bytes) -> None:
    with pytest.raises(ProtocolFailed):
        exchange([data])


def test_bytes_while_idle_make_the_connection_unusable() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        connection = http11._Connection(5.0)
        transport = _Transport()
        connection.connection_made(transport)
        answer = connection.exchange(b"request", "GET", False)
        connection.data_received(SIZED)
        await answer
        kept = not connection.closed_by_peer()
        connection.data_received(b"HTTP/1.1 408 Request Timeout\r\n\r\n")  # answers nothing
        return kept, connection.closed_by_peer(), transport.is_closing()

    assert asyncio.run(scenario()) == (True, True, True)
