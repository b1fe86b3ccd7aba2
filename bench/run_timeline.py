"""Where a whole `decflow test` run's wall time goes: a timeline of each stage.

Runs `decflow test` over `--requests` cases against `http_throughput.py`'s loopback server
(fixed latency, `--concurrency` in flight), with the command wrapped so that it notes the
wall-clock time and its own CPU time when the interpreter is up, when `decflow.cli` is
imported, when each stage starts and ends, and at exit. The server notes when the first
request arrived and the last answer left (same clock), so each run splits into: before
the first request, calls, after the last answer; and the median time it held a request
(head read to answer written: the latency plus what its own loop adds). Prints each run and
the medians.

    python bench/run_timeline.py --src src --runs 5
    python bench/run_timeline.py --src /tmp/before/src --runs 5   # another checkout's tree
    python bench/run_timeline.py --src src --runs 5 --pin   # server and command on their own CPUs

Byte-compile a tree before timing it (`python -m compileall -q SRC`): a shell with
PYTHONDONTWRITEBYTECODE set recompiles it on every run otherwise. Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import http_throughput as server_side  # the bench server and its suite

# Runs the `decflow` command with marks at the interpreter's start, the CLI's import, each
# stage's start and end and the exit, written to TIMELINE_OUT as "wall<TAB>cpu<TAB>mark".
TRACED = r"""
import os, sys, time
T0 = float(os.environ["TIMELINE_T0"])
marks = []
def mark(what):
    marks.append((time.time() - T0, time.process_time(), what))
mark("python up")
import decflow.cli as cli
import decflow.pipeline.stage as stage_module
mark("cli imported")
run_one = stage_module._run_stage
def traced(stage, context):
    mark(f"start {stage.name}")
    try:
        return run_one(stage, context)
    finally:
        mark(f"end {stage.name}")
stage_module._run_stage = traced
finish = cli._exit
def _exit(code):
    mark("exit")
    with open(os.environ["TIMELINE_OUT"], "w") as handle:
        handle.writelines(f"{t:.4f}\t{c:.4f}\t{w}\n" for t, c, w in marks)
    finish(code)
cli._exit = _exit
cli.main()
"""

PHASES = ("before first request", "calls", "after last answer", "wall", "cpu",
          "server held ms")


def one_run(folder: Path, contract: Path, url: str, src: str, index: int
            ) -> tuple[dict[str, float], list[tuple[str, float, float]]]:
    """The phases and marks of one run in a fresh store."""
    server_side._stamps(url)  # reset
    started = time.time()
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()),
           "TIMELINE_T0": repr(started), "TIMELINE_OUT": str(folder / "marks.tsv")}
    done = subprocess.run(
        [sys.executable, "-c", TRACED, "test", str(contract), "--no-healthcheck",
         "--store", str(folder / f"store{index}")],
        cwd=folder, env=env, capture_output=True, text=True, check=False,
    )
    ended = time.time() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"decflow test failed: {done.stdout[-800:]}{done.stderr[-800:]}")
    stamps = server_side._stamps(url)
    first, last = stamps["first"] - started, stamps["last"] - started
    marks = []
    for line in (folder / "marks.tsv").read_text().splitlines():
        wall, cpu, what = line.split("\t")
        marks.append((what, float(wall), float(cpu)))
    cpu = next(c for what, _, c in marks if what == "exit")
    return {"before first request": first, "calls": last - first,
            "after last answer": ended - last, "wall": ended, "cpu": cpu,
            "server held ms": stamps["held_median_ms"]}, marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default="src", help="the source tree to run (default: src)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--pin", action="store_true", help=server_side.PIN_HELP)
    parser.add_argument("--server", choices=("c", "lean", "streams"), default="c",
                        help=server_side.SERVER_HELP)
    args = parser.parse_args()
    port = server_side._free_port()
    server = server_side.start_server(port, args.latency_ms, args.pin, args.server)
    try:
        server_side._wait_for(port)
        if args.pin:
            server_side.pin(server=False)
        url = f"http://127.0.0.1:{port}/decide"
        ideal = args.requests * args.latency_ms / 1000 / args.concurrency
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            contract = server_side._write_suite(folder, url, args.requests, args.concurrency)
            phases: dict[str, list[float]] = {name: [] for name in PHASES}
            at_mark: dict[str, list[tuple[float, float]]] = {}
            for index in range(args.runs):
                figures, marks = one_run(folder, contract, url, args.src, index)
                for name in PHASES:
                    phases[name].append(figures[name])
                for what, wall, cpu in marks:
                    at_mark.setdefault(what, []).append((wall, cpu))
                print(f"run {index + 1}: wall {figures['wall']:.3f} s, first request "
                      f"{figures['before first request']:.3f}, calls {figures['calls']:.3f}, "
                      f"after {figures['after last answer']:.3f}, load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
        print(f"medians of {args.runs} runs{' (pinned)' if args.pin else ''} "
              "(wall s / CPU s at each mark):")
        for what, values in at_mark.items():
            print(f"  {what:22s} {statistics.median(v[0] for v in values):7.3f} / "
                  f"{statistics.median(v[1] for v in values):6.3f}")
        for name in PHASES:
            print(f"  {name:22s} {statistics.median(phases[name]):7.3f}")
        print(f"  share of ideal         {ideal / statistics.median(phases['wall']):.1%}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
