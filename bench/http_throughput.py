"""HTTP backend throughput on loopback against a server with fixed latency.

Starts an HTTP/1.1 keep-alive server in a child process that answers every
`decguard.http/0.1` request a fixed delay after its head arrived (by default
bench/latency_server.c, built with `cc`; `--server` picks one of the asyncio servers), then
sends `--requests` decisions through
`decflow.backends.http.HttpBackend.predict` with at most `--concurrency` in flight, once per
client design (`decflow`: the shipped asyncio HTTP/1.1 pool; `CxN`: C httpx AsyncClients
with N connections each, round-robin; `floor`: a minimal client that sends the next request
the moment an answer is in, no decflow: what the server and loopback allow). Reports
calls/s, the share of the ideal `concurrency / latency`, client CPU seconds and the load
average. A whole run's wall time is split where the server saw its first request and sent
its last answer: start-up (process start, imports, dataset, requests), calls, and after the
calls (summary, report, exit).

    python bench/http_throughput.py                       # 20,000 requests, 64 in flight, 20 ms
    python bench/http_throughput.py --designs 1x64,decflow  # compare designs
    python bench/http_throughput.py --cli --decguard /tmp/dg/bin/decguard
        # + whole `decflow test` and `decguard test` runs (DecGuard 0.1.1 in a throwaway venv)
    python bench/http_throughput.py --designs decflow --cli --repeat 5 --decguard … \
        --profile /tmp/run.prof     # medians of 5 interleaved runs, server CPU, a profile
    python bench/http_throughput.py --designs decflow --cli --repeat 5 --decguard … \
        --before-src /tmp/before/src --profile /tmp/run.prof
        # + the same whole run from another source tree (A/B/DecGuard interleaved; profiles
        #   of both: /tmp/run.prof and /tmp/run.prof.before)
    python bench/http_throughput.py --designs floor,decflow --pin
        # the server on its own CPU, the clients on the others (see `--pin`)
    python bench/http_throughput.py --designs floor,decflow --server streams
        # the asyncio streams server the figures of sessions 1-7 were measured with

Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

ANSWER = json.dumps(
    {"probabilities": {"refund": 0.7, "reject": 0.1, "review": 0.2}, "model_version": "bench"}
).encode()


# -- server (child process) -------------------------------------------------------------


def _response(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


# When the first request of a run arrived and its last answer left (time.time(), shared
# with the client process), read and reset by `GET /stamps`: a whole run's wall time
# split into start-up, calls and the rest.
STAMPS: dict[str, float | None] = {"first": None, "last": None}
# How long the server itself held each request since the stamps were last read: from its
# head being read to its answer being written (the fixed latency and what the server's own
# loop adds to it: a client cannot get answers faster than this).
HELD_S: list[float] = []


def _held_ms() -> dict[str, float | None]:
    """The median, mean and 99th percentile of `HELD_S` in ms (None when empty)."""
    held = sorted(HELD_S)
    if not held:
        return {"held_median_ms": None, "held_mean_ms": None, "held_p99_ms": None}
    return {"held_median_ms": 1000 * held[len(held) // 2],
            "held_mean_ms": 1000 * sum(held) / len(held),
            "held_p99_ms": 1000 * held[int(len(held) * 0.99)]}


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float):
    response = _response(ANSWER)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            arrived = time.perf_counter()
            if head.startswith(b"GET /stamps "):
                writer.write(_response(json.dumps({**STAMPS, **_held_ms()}).encode()))
                STAMPS.update(first=None, last=None)
                HELD_S.clear()
                continue
            if STAMPS["first"] is None:
                STAMPS["first"] = time.time()
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            await asyncio.sleep(delay)
            writer.write(response)
            STAMPS["last"] = time.time()
            HELD_S.append(time.perf_counter() - arrived)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


class _Exchanges(asyncio.Protocol):
    """One connection of the `lean` server: each request's head and body parsed as the
    bytes arrive, its answer written by a timer `delay` after its head was read (one timer
    per request; no task, stream or future)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.buffer = b""
        self.loop = asyncio.get_running_loop()
        self.response = _response(ANSWER)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            head = buffer[:end + 4]
            at = head.lower().find(b"\r\ncontent-length:")
            length = int(head[at + 17:head.index(b"\r\n", at + 2)]) if at >= 0 else 0
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length:]
            arrived = time.perf_counter()
            if head.startswith(b"GET /stamps "):
                self.transport.write(_response(json.dumps({**STAMPS, **_held_ms()}).encode()))
                STAMPS.update(first=None, last=None)
                HELD_S.clear()
                continue
            if STAMPS["first"] is None:
                STAMPS["first"] = time.time()
            self.loop.call_later(self.delay, self.answer, arrived)
        self.buffer = buffer

    def answer(self, arrived: float) -> None:
        if not self.transport.is_closing():
            self.transport.write(self.response)
        STAMPS["last"] = time.time()
        HELD_S.append(time.perf_counter() - arrived)


async def _serve(port: int, delay: float, design: str) -> None:
    if design == "streams":
        server = await asyncio.start_server(
            lambda r, w: _handle(r, w, delay), "127.0.0.1", port, backlog=1024
        )
    else:
        server = await asyncio.get_running_loop().create_server(
            lambda: _Exchanges(delay), "127.0.0.1", port, backlog=1024
        )
    async with server:
        await server.serve_forever()


# -- client -------------------------------------------------------------------------------


SERVER_HELP = ("the loopback server: `c` (bench/latency_server.c, built with `cc`: ~0.05 ms "
               "of CPU per request, most of it the kernel's loopback TCP; answers woken by a "
               "timer at the deadline), "
               "`lean` (asyncio, a protocol per connection and a timer per request) or "
               "`streams` (asyncio streams, a task per connection: the server "
               "of sessions 1-7). On 2 cores the server shares the CPUs with the client it "
               "measures: see bench/README.md")
PIN_HELP = ("the server on the last CPU and this process and the commands it starts on the "
            "others (Linux): on loopback the kernel wakes each side on the CPU of the other, "
            "so unpinned they take turns on one CPU; a real service runs elsewhere")


def pin(server: bool) -> None:
    """`--pin`: the server on the last CPU this process may use, the client side on the
    others (children inherit it). Call it in the server before the client pins itself."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    os.sched_setaffinity(0, {cpus[-1]} if server else set(cpus[:-1]))


def start_server(port: int, latency_ms: float, pinned: bool,
                 design: str = "c") -> subprocess.Popen[bytes]:
    """The bench server in a child process (`--pin`: on its own CPU; `c`: compiled from
    bench/latency_server.c with the system's C compiler into a temporary folder)."""
    if design != "c":
        return subprocess.Popen([sys.executable, __file__, "--serve", str(port),
                                 "--latency-ms", str(latency_ms), "--server", design,
                                 *(["--pin"] if pinned else [])])
    with tempfile.TemporaryDirectory() as folder:  # a running program outlives its file
        built = Path(folder) / "latency_server"
        subprocess.run(["cc", "-O2", "-o", str(built), str(Path(__file__).with_name(
            "latency_server.c"))], check=True)
        return subprocess.Popen([str(built), str(port), f"{latency_ms:g}", ANSWER.decode()],
                                preexec_fn=(lambda: pin(server=True)) if pinned else None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("bench server did not start")


class _AsyncClientPool:
    """The alternative measured against decflow's pool: `clients` httpx AsyncClients with
    `connections` each, used round-robin (success path only: enough for a benchmark)."""

    def __init__(self, clients: int, connections: int) -> None:
        import httpx

        limits = httpx.Limits(max_connections=connections)
        self._clients = [httpx.AsyncClient(limits=limits, timeout=30) for _ in range(clients)]
        self._turn = 0

    async def request(self, method, target, headers, body):
        from decflow.backends.http11 import HttpResponse

        client = self._clients[self._turn]
        self._turn = (self._turn + 1) % len(self._clients)
        scheme = "https" if target.secure else "http"
        url = f"{scheme}://{target.authority}{target.path}"
        response = await client.request(method, url, headers=headers, content=body)
        return HttpResponse(response.status_code, response.headers, response.content)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


def _pool(design: str):
    """`decflow` (the shipped HTTP/1.1 pool) or `CxN` (C AsyncClients, N connections each)."""
    from decflow.backends.http11 import Http11Pool

    if design == "decflow":
        return Http11Pool(30.0)
    clients, connections = (int(x) for x in design.split("x"))
    return _AsyncClientPool(clients, connections)


class _FloorClient(asyncio.Protocol):
    """One connection of the `floor` design: a fixed request sent again as soon as an
    answer (a head and `ANSWER`'s length of body) is in; no parsing, no decflow."""

    request = (b"POST /decide HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
               b"Content-Length: 2\r\n\r\n{}")

    def __init__(self, state: dict) -> None:
        self.state = state
        self.buffer = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head = self.buffer.find(b"\r\n\r\n")
        if head < 0 or len(self.buffer) < head + 4 + len(ANSWER):
            return
        self.buffer = b""
        state = self.state
        state["done"] += 1
        if state["sent"] < state["n"]:
            self.send()
        elif state["done"] == state["n"]:
            state["finished"].set_result(None)

    def send(self) -> None:
        self.state["sent"] += 1
        self.transport.write(self.request)


async def _floor(url: str, n: int, concurrency: int):
    """What the server and loopback allow: `concurrency` connections each sending the next
    request the moment an answer is in, with next to no client work."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    loop = asyncio.get_running_loop()
    state = {"sent": 0, "done": 0, "n": n, "finished": loop.create_future()}
    clients = [(await loop.create_connection(lambda: _FloorClient(state), "127.0.0.1",
                                             port))[1] for _ in range(concurrency)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for client in clients:
        client.send()
    await state["finished"]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    for client in clients:
        client.transport.close()
    return wall, cpu, 0


async def _run_design(url: str, design: str, n: int, concurrency: int):
    if design == "floor":
        return await _floor(url, n, concurrency)
    from decflow.backends.base import DecisionRequest, DecisionSpec
    from decflow.backends.http import HttpBackend

    spec = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"))
    settings = SimpleNamespace(
        url=url, health_url=None, timeout_s=30.0, max_retries=0, retry_backoff_s=0.5,
        headers={}, headers_from_env={}, bearer_token_env=None, label_map={},
    )
    backend = HttpBackend("default", "bench", settings, spec)
    backend.caller.pool = _pool(design)
    semaphore = asyncio.Semaphore(concurrency)
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        async with semaphore:
            try:
                await backend.predict(DecisionRequest(f"c{i}", spec, "The blender arrived."))
            except Exception:
                errors += 1

    # warm-up: open the connections outside the timed window
    await asyncio.gather(*(one(i) for i in range(concurrency)))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    await backend.aclose()
    return wall, cpu, errors


def _write_suite(folder: Path, url: str, n: int, concurrency: int) -> Path:
    """A plain DecGuard 0.1 contract (which decflow loads unchanged) over n cases."""
    with open(folder / "golden.jsonl", "w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"c{i}", "input": "The blender arrived.",
                                     "expected": "refund"}) + "\n")
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
        f"backend: {{provider: http, url: '{url}', model: bench}}\n"
        "dataset: golden.jsonl\n"
        f"evaluation: {{max_concurrency: {concurrency}}}\n"
    )
    return path


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _with_source(source: str | None) -> dict[str, str] | None:
    """The environment of a child that imports decflow from `source` (None: as this one)."""
    return None if source is None else {**os.environ, "PYTHONPATH": source}


def _stamps(url: str) -> dict[str, float]:
    """The server's first-request and last-answer times since the last asking, and how
    long it held a request (`held_*_ms`)."""
    with urllib.request.urlopen(url.replace("/decide", "/stamps"), timeout=10) as answer:
        stamps: dict[str, float] = json.loads(answer.read())
        return stamps


# What one whole run measured: wall, client CPU and server CPU seconds, the wall split
# into start-up (to the first request), calls (to the last answer) and the rest, and the
# median time the server held a request (ms).
Figures = tuple[float, float, float, float, float, float, float]


def _cli_run(command: list[str], url: str, n: int, concurrency: int, server: int,
             env: dict[str, str] | None) -> Figures:
    """The `Figures` of `<command> test` over n cases against the server (process
    `server`), in a fresh folder and store."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        contract = _write_suite(folder, url, n, concurrency)
        _stamps(url)  # reset
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        served = _process_cpu_s(server)
        start, started = time.perf_counter(), time.time()
        done = subprocess.run(
            [*command, "test", str(contract), "--no-healthcheck"],
            cwd=folder, capture_output=True, text=True, check=False, env=env,
        )
        wall, ended = time.perf_counter() - start, time.time()
        served = _process_cpu_s(server) - served
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{command} failed: {done.stdout[-500:]}{done.stderr[-500:]}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        stamps = _stamps(url)
        first, last = stamps["first"], stamps["last"]
        return (wall, cpu, served, first - started, last - first, ended - last,
                stamps["held_median_ms"])


# Runs `decflow test` as the `decflow` command does (its process settings included), with
# the CPU profile of the whole run written where the command exits.
PROFILED = """
import cProfile, os, sys, time
import decflow.cli as cli
out = sys.argv.pop(1)  # the command reads the rest of the arguments
profile = cProfile.Profile(time.process_time)
finish = cli._exit
def _exit(code):
    profile.disable()
    profile.dump_stats(out)
    finish(code)
cli._exit = _exit
profile.enable()
cli.main()
"""


def _profiled_run(url: str, n: int, concurrency: int, out: str,
                  env: dict[str, str] | None) -> None:
    """One `decflow test` under cProfile (CPU time), stats written to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        contract = _write_suite(folder, url, n, concurrency)
        subprocess.run([sys.executable, "-c", PROFILED, os.path.abspath(out), "test",
                        str(contract), "--no-healthcheck"], cwd=folder, check=False,
                       capture_output=True, env=env)


def _held(stamps: dict[str, float]) -> str:
    """How long the server held a request, as "median/mean/p99" ms."""
    if stamps.get("held_median_ms") is None:
        return "-"
    return (f"{stamps['held_median_ms']:.2f}/{stamps['held_mean_ms']:.2f}/"
            f"{stamps['held_p99_ms']:.2f}")


def _serve_here(port: int, delay: float, design: str, pinned: bool) -> None:
    """Run a Python server design in this process (`--serve`) until it is terminated."""
    if pinned:
        pin(server=True)
    asyncio.run(_serve(port, delay, design))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--designs", default="1x64,16x4,64x1,decflow")
    parser.add_argument("--decguard", help="path of a decguard 0.1.1 executable (optional)")
    parser.add_argument("--cli", action="store_true",
                        help="also time a whole `decflow test` run (CLI, engine, store, report)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="whole CLI runs per command (interleaved; medians reported)")
    parser.add_argument("--profile", metavar="FILE",
                        help="also profile one whole decflow test run (CPU time) into FILE")
    parser.add_argument("--before-src", metavar="DIR",
                        help="with --cli: also time decflow imported from DIR (another "
                             "checkout's src/), interleaved with the others")
    parser.add_argument("--pin", action="store_true", help=PIN_HELP)
    parser.add_argument("--server", choices=("c", "lean", "streams"), default="c",
                        help=SERVER_HELP)
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N CPU-bound processes (`while True: pass`) running beside "
                             "everything measured, as other jobs on a busy CI machine")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    delay = args.latency_ms / 1000
    if args.serve:
        _serve_here(args.serve, delay, args.server, args.pin)
        return

    port = _free_port()
    server = start_server(port, args.latency_ms, args.pin, args.server)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        _wait_for(port)
        if args.pin:
            pin(server=False)
        url = f"http://127.0.0.1:{port}/decide"
        ideal = args.concurrency / delay
        print(f"requests={args.requests} concurrency={args.concurrency} "
              f"latency={args.latency_ms:g}ms ideal={ideal:,.0f}/s load={os.getloadavg()[0]:.2f}"
              f"{' pinned' if args.pin else ''} server={args.server}"
              f"{f' busy={args.busy}' if args.busy else ''}")
        print(f"{'design':>16} {'wall s':>8} {'calls/s':>9} {'ideal':>6} {'cpu s':>7} errors"
              "  server held ms (median/mean/p99)")
        for design in args.designs.split(","):
            _stamps(url)  # reset
            wall, cpu, errors = asyncio.run(
                _run_design(url, design, args.requests, args.concurrency)
            )
            rate = args.requests / wall
            print(f"{design:>16} {wall:8.2f} {rate:9,.0f} {rate / ideal:6.0%} "
                  f"{cpu:7.2f} {errors:6d}  {_held(_stamps(url))}")
        decflow = [sys.executable, "-m", "decflow"]
        runs: list[tuple[str, list[str], dict[str, str] | None]] = []
        if args.cli:
            runs.append(("decflow test", decflow, None))
            if args.before_src:
                runs.append(("decflow before", decflow, _with_source(args.before_src)))
        if args.decguard and shutil.which(args.decguard):
            runs.append(("decguard test", [args.decguard], None))
        measured: dict[str, list[Figures]] = {label: [] for label, _, _ in runs}
        for attempt in range(args.repeat):  # interleaved: A B A B …
            for label, command, env in runs:
                figures = _cli_run(command, url, args.requests, args.concurrency, server.pid,
                                   env)
                measured[label].append(figures)
                wall, cpu, served, start_up, calls, rest, held = figures
                rate = args.requests / wall
                print(f"{label:>16} {wall:8.2f} {rate:9,.0f} {rate / ideal:6.0%} "
                      f"{cpu:7.2f} server cpu {served:5.2f} (whole CLI run {attempt + 1}, "
                      f"load {os.getloadavg()[0]:.1f}; start-up {start_up:.2f} s, calls "
                      f"{calls:.2f} s, after the calls {rest:.2f} s; server held a "
                      f"request {held:.2f} ms, median)", flush=True)
        for label, figures in measured.items():
            if len(figures) > 1:
                wall = _median([f[0] for f in figures])
                print(f"{label:>16} median of {len(figures)}: {wall:.2f} s, "
                      f"{args.requests / wall:,.0f} calls/s, "
                      f"{args.requests / wall / ideal:.0%} of ideal, client cpu "
                      f"{_median([f[1] for f in figures]):.2f} s, server cpu "
                      f"{_median([f[2] for f in figures]):.2f} s; start-up "
                      f"{_median([f[3] for f in figures]):.2f} s, calls "
                      f"{_median([f[4] for f in figures]):.2f} s, after the calls "
                      f"{_median([f[5] for f in figures]):.2f} s; server held a request "
                      f"{_median([f[6] for f in figures]):.2f} ms")
        if len(measured.get("decflow before", [])) > 0:
            pairs = list(zip(measured["decflow test"], measured["decflow before"], strict=True))
            print("decflow test / before, pair by pair: wall "
                  + ", ".join(f"{a[0] / b[0]:.3f}" for a, b in pairs)
                  + "; client cpu " + ", ".join(f"{a[1] / b[1]:.3f}" for a, b in pairs))
        if args.profile:
            _profiled_run(url, args.requests, args.concurrency, args.profile, None)
            print(f"CPU profile of one decflow test run: {args.profile}")
            if args.before_src:
                before = f"{args.profile}.before"
                _profiled_run(url, args.requests, args.concurrency, before,
                              _with_source(args.before_src))
                print(f"CPU profile of one run from {args.before_src}: {before}")
    finally:
        for process in [*busy, server]:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
