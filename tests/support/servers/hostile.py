"""A hostile HTTP server on 127.0.0.1: what a stranger's endpoint may answer decflow.

The first segment of the request path picks the answer (`/trickle/chat/completions`,
`/metadata-lists/decide`, ...), so one server plays every part; `GET` is always 200 (the
health check). `/…/decide` answers speak the http backend's protocol (probabilities for
the refund labels), `/…/chat/completions` ones the OpenAI chat API's. Answers are built on
first use and kept. Every request head is recorded (`heads`).
"""

from __future__ import annotations

import gzip
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

TRICKLE_EVERY_S = 0.5


def _http(body: bytes, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *headers, "", ""]
    return "\r\n".join(head).encode() + body


def _decision(extra: str = "") -> bytes:
    """An http backend answer, with `extra` members spliced in raw."""
    return _http(f'{{"probabilities": {{"refund": 0.8, "reject": 0.1, "review": 0.1}}'
                 f'{extra}}}'.encode())


def _chat(content: str, extra: str = "") -> bytes:
    """A chat-completions answer: `content` is the message's JSON text, `extra` raw members
    spliced into the document."""
    return _http((f'{{"model": "hostile", "choices": [{{"message": {{"role": "assistant", '
                  f'"content": {json.dumps(content)}}}}}]{extra}}}').encode())


def _gzip_bomb() -> bytes:
    """A 2 MB gzip body that inflates to 2 GB of zeros, announced as JSON."""
    member = gzip.compress(b"\0" * (1 << 24), compresslevel=9)  # 16 MB of zeros → 16 KB
    return _http(member * 128, "Content-Encoding: gzip")


ANSWERS: dict[str, Callable[[], bytes]] = {
    "ok": lambda: _chat('["A paraphrase."]'),
    "decide": _decision,
    "gzip": _gzip_bomb,
    "deep": lambda: _http(b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    "deep-content": lambda: _chat("[" * 200_000 + "]" * 200_000),
    "nan": lambda: _chat('["a"]', ', "usage": NaN'),
    "huge-number": lambda: _chat('["a"]', ', "usage": 1e999'),
    "duplicate": lambda: _chat('["a"]', ', "model": "again"'),
    "metadata-lists": lambda: _decision(', "metadata": {"x": [' + "[]," * 21_000_000 + "[]]}"),
    "surrogate-model": lambda: _decision(', "model": "m\\ud800"'),
}


class HostileServer:
    def __init__(self) -> None:
        self.heads: list[str] = []
        self._answers: dict[str, bytes] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    byte = self.rfile.read(1)
                    if not byte:
                        return
                    head += byte
                text = head.decode("latin-1")
                length = next((int(line.split(":", 1)[1]) for line in text.split("\r\n")
                               if line.lower().startswith("content-length:")), 0)
                self.rfile.read(length)
                owner.heads.append(text)
                method, path = text.split(" ", 2)[:2]
                try:
                    owner.answer(self.connection, method, path.strip("/").split("/")[0])
                except OSError:  # the client gave up, as it should
                    return

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, connection: socket.socket, method: str, mode: str) -> None:
        if method == "GET":
            connection.sendall(_http(b'{"status": "ok"}'))
        elif mode == "trickle":
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(1000):
                time.sleep(TRICKLE_EVERY_S)
                connection.sendall(b" ")
        else:
            with self._lock:
                if mode not in self._answers:
                    self._answers[mode] = ANSWERS[mode]()
            connection.sendall(self._answers[mode])
        connection.shutdown(socket.SHUT_WR)


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    running = HostileServer()
    running.thread.start()
    try:
        yield running
    finally:
        running.server.shutdown()
        running.server.server_close()
