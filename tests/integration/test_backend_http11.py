"""The HTTP/1.1 client under the remote backends, against raw scripted servers."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from pathlib import Path

import pytest

from decflow.backends.base import BackendTimeout, BackendUnavailable
from decflow.backends.http11 import Http11Pool, HttpResponse, Target
from decflow.backends.httpclient import HttpCaller
from tests.support.servers.raw import Raw, RawServer
from tests.support.servers.recording import RecordingServer, Reply

BODY = b'{"ok": true}'


def ok(extra: bytes = b"", body: bytes = BODY) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def get_all(url: str, count: int, caller: HttpCaller | None = None) -> list[HttpResponse]:
    caller = caller or HttpCaller(provider="http", backend_name="t", timeout_s=2,
                                  max_retries=0, retry_backoff_s=0)

    async def calls() -> list[HttpResponse]:
        try:
            return [await caller.post_json(url, {"n": n}) for n in range(count)]
        finally:
            await caller.aclose()

    return asyncio.run(calls())


def test_keep_alive_reuses_one_connection() -> None:
    with RawServer([Raw(ok())] * 3) as server:
        responses = get_all(server.url("/d?x=1"), 3)
    assert [json.loads(r.content) for r in responses] == [{"ok": True}] * 3
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("POST /d?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.url().split(':')[2].rstrip('/')}" in first
    assert first.endswith('\r\n\r\n{"n":0}')


def test_chunked_body_with_extension_and_trailer() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\n{\"ok\"\r\n7\r\n: true}\r\n0\r\nX-Trailer: y\r\n\r\n")
    with RawServer([Raw(chunked), Raw(ok())]) as server:
        first, second = get_all(server.url(), 2)
    assert first.content == BODY and second.content == BODY
    assert server.connections == 1


def test_body_until_close_and_connection_close_open_new_connections() -> None:
    until_close = Raw(b"HTTP/1.1 200 OK\r\n\r\n" + BODY, close=True)
    with RawServer([until_close, Raw(ok(b"Connection: close\r\n"), close=True), Raw(ok())]) \
            as server:
        responses = get_all(server.url(), 3)
    assert [r.content for r in responses] == [BODY] * 3
    assert server.connections == 3


def test_interim_1xx_is_skipped() -> None:
    with RawServer([Raw(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + ok())]) as server:
        (response,) = get_all(server.url(), 1)
    assert response.status == 200 and response.content == BODY


def test_idle_connection_closed_by_the_server_is_replaced_transparently() -> None:
    # The server answers, then closes the kept-alive connection without saying so.
    with RawServer([Raw(ok(), close=True), Raw(ok())]) as server:
        responses = get_all(server.url(), 2)
    assert [r.status for r in responses] == [200, 200]
    assert server.connections == 2


@pytest.mark.parametrize(
    "data",
    [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"short\"",
     b"HTTP/1.1 200 OK\r\nbad header line\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
     b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n",  # digits to str.isdigit, not to int()
     b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n"],
)
def test_malformed_answers_are_unavailable(data: bytes) -> None:
    with RawServer([Raw(data, close=True)]) as server, pytest.raises(
        BackendUnavailable, match="failed: RemoteProtocolError"
    ):
        get_all(server.url(), 1)


def test_target_parsing() -> None:
    assert Target.parse("https://api.example.com/v1/x?a=1#frag") == Target(
        True, "api.example.com", 443, "api.example.com", "/v1/x?a=1")
    assert Target.parse("http://[::1]:8080") == Target(False, "::1", 8080, "[::1]:8080", "/")
    with pytest.raises(ValueError):
        Target.parse("ftp://x/")


def test_pool_closes_idle_connections() -> None:
    async def scenario(url: str) -> None:
        pool = Http11Pool(2.0)
        response = await pool.request("GET", Target.parse(url), {}, None)
        assert response.status == 200
        await pool.aclose()

    with RawServer([Raw(ok())]) as server:
        asyncio.run(scenario(server.url()))
    assert server.requests[0].startswith(b"GET / HTTP/1.1\r\n")
    assert b"Content-Length" not in server.requests[0]


# -- what is sent again, and what never is ---------------------------------------------------
# The server counts every request it read in full: a request the client sends twice shows up
# twice, whatever the client reports.

RETRYING = {"max_retries": 3, "retry_backoff_s": 0}


def caller(**settings: float) -> HttpCaller:
    return HttpCaller(provider="http", backend_name="t", timeout_s=2,
                      **{"max_retries": 0, "retry_backoff_s": 0, **settings})


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
def test_fresh_connection_failing_after_the_request_is_never_sent_again(reset: bool) -> None:
    # The request was written in full on a new connection: the server may have done the work.
    with RawServer([Raw(b"", close=True, reset=reset), Raw(ok())]) as server, pytest.raises(
        BackendUnavailable, match=r"failed: (ConnectionResetError|RemoteProtocolError)"
    ):
        get_all(server.url(), 1, caller(**RETRYING))
    assert len(server.requests) == 1
    assert server.connections == 1


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
def test_reused_connection_closed_before_any_answer_byte_is_sent_once_more(reset: bool) -> None:
    # Second request: the kept-alive connection is closed as it arrives (the stale-connection
    # race), so it goes out once more, on a new connection.
    script = [Raw(ok()), Raw(b"", close=True, reset=reset), Raw(ok())]
    with RawServer(script) as server:
        responses = get_all(server.url(), 2)
    assert [r.status for r in responses] == [200, 200]
    assert len(server.requests) == 3
    assert server.connections == 2


def test_the_stale_connection_retry_happens_once() -> None:
    # The one resend fails too, on its new connection: no further attempt, retries or not.
    script = [Raw(ok()), Raw(b"", close=True, reset=True), Raw(b"", close=True, reset=True),
              Raw(ok())]
    with RawServer(script) as server, pytest.raises(BackendUnavailable):
        get_all(server.url(), 2, caller(**RETRYING))
    assert len(server.requests) == 3
    assert server.connections == 2


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
def test_reused_connection_failing_after_the_first_answer_byte_is_not_sent_again(
    reset: bool,
) -> None:
    partial = b"HTTP/1.1 200 OK\r\nContent-Le"
    script = [Raw(ok()), Raw(partial, close=True, reset=reset), Raw(ok())]
    with RawServer(script) as server, pytest.raises(BackendUnavailable, match="failed: "):
        get_all(server.url(), 2, caller(**RETRYING))
    assert len(server.requests) == 2
    assert server.connections == 1


def test_idle_connection_closed_long_before_reuse_gets_no_request() -> None:
    # The server's close arrived while the connection was idle: nothing is written to it.
    async def scenario(url: str) -> list[int]:
        client = caller()
        try:
            first = await client.get(url)
            await asyncio.sleep(0.2)  # the server's FIN arrives meanwhile
            second = await client.get(url)
        finally:
            await client.aclose()
        return [first.status, second.status]

    with RawServer([Raw(ok(), close=True), Raw(ok())]) as server:
        assert asyncio.run(scenario(server.url())) == [200, 200]
    assert len(server.requests) == 2
    assert server.connections == 2


# -- the exchange timeout: one timer per connection, moved on from request to request --------


def test_each_exchange_on_a_kept_connection_has_its_own_timeout() -> None:
    # Four answers of 0.15 s on one connection take longer together than the 0.4 s timeout:
    # none times out; the fifth, slower than the timeout alone, does.
    async def scenario(url: str) -> tuple[list[int], BaseException | None]:
        client = HttpCaller(provider="http", backend_name="t", timeout_s=0.4, max_retries=0,
                            retry_backoff_s=0)
        statuses = []
        try:
            for _ in range(4):
                statuses.append((await client.get(url)).status)
            try:
                await client.get(url)
            except BackendTimeout as exc:
                return statuses, exc
            return statuses, None
        finally:
            await client.aclose()

    script = [Reply(200, BODY, delay=0.15)] * 4 + [Reply(200, BODY, delay=1.0)]
    with RecordingServer(script=script) as server:
        statuses, failure = asyncio.run(scenario(server.url()))
    assert statuses == [200] * 4
    assert isinstance(failure, BackendTimeout) and "timed out after 0.4s" in str(failure)
    assert len(server.requests) == 5


def test_a_cancelled_exchange_closes_its_connection() -> None:
    # Ctrl-C cancels the calls: the connection whose answer was awaited is not kept.

    async def scenario(url: str) -> tuple[int, int]:
        pool = Http11Pool(5.0)
        target = Target.parse(url)
        await pool.request("GET", target, {}, None)
        task = asyncio.ensure_future(pool.request("GET", target, {}, None))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        idle = sum(len(connections) for connections in
                   pool._idle[asyncio.get_running_loop()].values())
        response = await pool.request("GET", target, {}, None)
        await pool.aclose()
        return idle, response.status

    script = [Reply(200, BODY), Reply(200, BODY, delay=0.5), Reply(200, BODY)]
    with RecordingServer(script=script) as server:
        assert asyncio.run(scenario(server.url())) == (0, 200)
        assert len(server.requests) == 3


# -- TLS --------------------------------------------------------------------------------------


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, written to `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_https_keeps_one_tls_connection_for_sized_and_chunked_answers(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\n{\"ok\"\r\n7\r\n: true}\r\n0\r\n\r\n")

    async def scenario() -> tuple[list[bytes], int]:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        connections = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            for answer in (ok(), chunked, ok()):
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r")[0]))
                writer.write(answer)
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        pool = Http11Pool(5.0)
        pool._context = ssl.create_default_context(cafile=str(cert_file))
        target = Target.parse(f"https://127.0.0.1:{port}/d")
        try:
            bodies = [(await pool.request("POST", target, {}, b"{}")).content for _ in range(3)]
        finally:
            await pool.aclose()
            server.close()
            await server.wait_closed()
        return bodies, connections

    assert asyncio.run(scenario()) == ([BODY] * 3, 1)
