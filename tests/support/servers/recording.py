"""A scriptable HTTP/1.1 server on 127.0.0.1 that records every request it receives.

Replies come from a script (one per request, in order) and, once it is used up, from a
handler function. Runs `http.server.ThreadingHTTPServer` in a background thread.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = b""  # bytes are sent as they are; anything else as JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


Handler = Callable[[Recorded], Reply]


class RecordingServer:
    def __init__(self, handler: Handler | None = None, script: Iterable[Reply] = ()) -> None:
        self.handler = handler or (lambda _request: Reply(404, b""))
        self.script: deque[Reply] = deque(script)
        self.requests: list[Recorded] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _reply_for(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.times.append(time.monotonic())
            if self.script:
                return self.script.popleft()
        return self.handler(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every request
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(self.command, self.path, dict(self.headers.items()), body)
                reply = server._reply_for(recorded)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.encoded()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return _Handler

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
