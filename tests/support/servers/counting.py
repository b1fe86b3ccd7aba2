"""A slow decision service that counts what it receives, for crash, signal and lock tests.

decguard.http/0.1 on 127.0.0.1 (stdlib): `POST /decide` answers after `delay_s` with
probabilities favouring a label chosen by the input's hash; `GET /health` is 200. It counts
every request per case id, received and answered, so a test sees exactly what was sent
again after a kill, and when each request started (`starts`, monotonic clock). With
`failing=True` every decision is a 500 (a run whose every case errors: exit 2), and the
request ids in `failing_ids` get a 500 each time. While the gate is closed (`hold`),
decisions are received but not answered until it opens again; `hold_after(n)` answers n
more decisions and then holds the rest. With `noisy=True` no two
answers are alike (the favoured label's probability follows the number of requests
answered so far), as a model sampled at a temperature.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

LABELS = ("refund", "reject", "review")


def favoured(text: str) -> str:
    return LABELS[hashlib.sha256(text.encode()).digest()[0] % len(LABELS)]


class CountingService:
    """decguard.http/0.1: POST /decide → probabilities (after `delay_s`); GET /health → 200."""

    def __init__(self, delay_s: float = 0.02, failing: bool = False,
                 noisy: bool = False) -> None:
        self.delay_s, self.failing, self.noisy = delay_s, failing, noisy
        self.failing_ids: set[str] = set()
        self.received: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.starts: list[float] = []
        self.in_progress = 0
        self.gate = threading.Event()
        self.gate.set()
        self.allowance: int | None = None  # decisions still answered before holding
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        # connections cut by the killed client are expected, not worth a traceback
        self.server.handle_error = lambda *_args: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self.lock:
            return Counter(self.received), Counter(self.answered)

    def total_received(self) -> int:
        with self.lock:
            return sum(self.received.values())

    def waiting(self) -> int:
        """Decisions received and not answered (nor abandoned by the client) yet."""
        with self.lock:
            return self.in_progress

    def started_after(self, moment: float) -> list[float]:
        """Start times of the requests received after `moment` (monotonic)."""
        with self.lock:
            return [start for start in self.starts if start > moment]

    def hold(self) -> None:
        """Answer nothing until `release` (requests are still received and counted)."""
        self.gate.clear()

    def hold_after(self, count: int) -> None:
        """Answer `count` more decisions, then hold the rest until `release`."""
        with self.lock:
            self.allowance = count

    def release(self) -> None:
        with self.lock:
            self.allowance = None
        self.gate.set()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                return

            def reply(self, body: bytes, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.reply(b'{"status": "ok"}')

            def do_POST(self) -> None:
                started = time.monotonic()
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                case_id = request["case_id"]
                with service.lock:
                    service.received[case_id] += 1
                    service.starts.append(started)
                    service.in_progress += 1
                try:
                    self.decide(request, case_id)
                finally:
                    with service.lock:
                        service.in_progress -= 1

            def decide(self, request: dict[str, Any], case_id: str) -> None:
                time.sleep(service.delay_s)
                with service.lock:
                    # one of the `hold_after` allowance passes even if the gate just closed
                    allowed = bool(service.allowance)
                    if service.allowance:
                        service.allowance -= 1
                    elif service.allowance == 0:
                        service.gate.clear()
                if not allowed:
                    service.gate.wait()
                if service.failing or case_id in service.failing_ids:
                    self.reply(b'{"error": "down"}', status=500)
                    return
                top = favoured(request["input"])
                high = 0.8
                if service.noisy:
                    with service.lock:
                        high = 0.4 + 0.01 * (sum(service.answered.values()) % 50)
                low = (1.0 - high) / 2
                probabilities = {label: (high if label == top else low)
                                 for label in request["decision"]["labels"]}
                self.reply(json.dumps({"probabilities": probabilities, "model": "counting",
                                       "model_version": "1"}).encode())
                with service.lock:
                    service.answered[case_id] += 1

        return Handler


@contextmanager
def counting_service(delay_s: float = 0.02, failing: bool = False,
                     noisy: bool = False) -> Iterator[CountingService]:
    running = CountingService(delay_s, failing, noisy)
    running.thread.start()
    try:
        yield running
    finally:
        running.release()
        running.server.shutdown()
        running.server.server_close()


def write_contract(folder: Path, service_url: str, cases: int, max_concurrency: int,
                   requirements: dict[str, float] | None = None) -> Path:
    """A refund-like contract on the counting service, with `cases` golden cases (every
    answer right, confidence 0.8: `{"max_ece": 0.1}` fails it)."""
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(cases):
            text = f"Request {i}: the item {'arrived damaged' if i % 3 else 'is fine'}."
            handle.write(json.dumps({"id": f"c{i:04d}", "input": text,
                                     "expected": favoured(text)}) + "\n")
    document = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice", "options": list(LABELS)},
        "backend": {"provider": "http", "url": f"{service_url}/decide",
                    "health_url": f"{service_url}/health", "timeout_s": 10},
        "dataset": "cases.jsonl",
        "evaluation": {"max_concurrency": max_concurrency},
        "requirements": requirements or {"min_accuracy": 0.9},
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
