"""A TCP server on 127.0.0.1 that answers each HTTP request with scripted raw bytes.

For testing the HTTP/1.1 client on what ordinary servers rarely send: chunked bodies,
bodies delimited by closing the connection, interim 1xx responses, malformed answers,
keep-alive connections closed while idle, and connections reset (TCP RST) after the
request was read. `requests` counts every request read in full, so a test can tell
whether the client sent one twice.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections import deque
from dataclasses import dataclass


@dataclass
class Raw:
    data: bytes
    close: bool = False  # close the connection after sending
    reset: bool = False  # then abort it with a TCP reset instead of a normal close


class RawServer:
    def __init__(self, script: list[Raw]) -> None:
        self.script = deque(script)
        self.connections = 0
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with owner._lock:
                    owner.connections += 1
                while True:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        byte = self.rfile.read(1)
                        if not byte:
                            return
                        head += byte
                    length = 0
                    for line in head.split(b"\r\n"):
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    body = self.rfile.read(length) if length else b""
                    with owner._lock:
                        owner.requests.append(head + body)
                        reply = owner.script.popleft() if owner.script else Raw(b"", True)
                    self.wfile.write(reply.data)
                    self.wfile.flush()
                    if reply.reset:
                        linger = struct.pack("ii", 1, 0)  # close() then sends RST
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                        self.connection.close()
                        return
                    if reply.close:
                        return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
