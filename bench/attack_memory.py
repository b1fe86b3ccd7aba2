"""Peak memory and time of decflow on three inputs that unfold (issue 31, SECURITY.md
"Memory bounds"): each is written under a work folder and the command is run under
`/usr/bin/time -v`, so any decflow checkout can be measured (`--src` puts it first on the
import path).

- a golden Parquet dataset (7 KB) whose one row group repeats a 1 MB `input` 3,000 times
  through a dictionary: `decflow validate`;
- the same as production records (2 KB): `decflow check`;
- an http backend answering 60 MB whose `metadata` holds 21 million empty lists, for a
  three-case dataset: `decflow test` (a loopback server in this process).

usage: python bench/attack_memory.py [--src PATH] [--work /tmp/decflow-attack-memory]
Careful: before the bounds, the Parquet inputs took 6 and 12 GB of memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROWS = 3000
LABELS = ["refund", "reject", "review"]
RECORD = {"decision": "refund_request", "selected": "refund",
          "probabilities": {"refund": 0.8, "reject": 0.1, "review": 0.1}}


def repeated_input(columns: dict[str, object]) -> pa.Table:
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * ROWS, pa.int32()),
                                              pa.array(["x" * 1_000_000]))
    return pa.table({**{name: [value] * ROWS for name, value in columns.items()},
                     "input": repeated})


def contract(folder: Path, **sections: object) -> Path:
    document = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice", "options": LABELS},
        "backend": {"provider": "mock", "default": {"refund": 0.8, "reject": 0.1,
                                                     "review": 0.1}},
        "dataset": "cases.jsonl", "requirements": {"min_accuracy": 0.5}, **sections,
    }
    path = folder / "decflow.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def serve_lists() -> ThreadingHTTPServer:
    body = (b'{"probabilities": {"refund": 0.8, "reject": 0.1, "review": 0.1}, '
            b'"metadata": {"x": [' + b"[]," * 21_000_000 + b"[]]}}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            return

        def do_GET(self) -> None:
            self.answer(b'{"status": "ok"}')

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.answer(body)

        def answer(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(command: list[str], cwd: Path, src: str | None) -> str:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "decflow", *command],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", done.stderr)
    said = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    peak_mb = int(peak.group(1)) / 1024 if peak else float("nan")
    return (f"exit {done.returncode}, peak {peak_mb:,.0f} MB, wall "
            f"{wall.group(1) if wall else '?'}; {said[0][:140] if said else 'no error line'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", help="a decflow src/ folder to measure (default: installed)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/decflow-attack-memory"))
    options = parser.parse_args()
    work = options.work
    for name in ("golden", "records", "answer"):
        (work / name).mkdir(parents=True, exist_ok=True)

    golden = work / "golden"
    contract(golden, dataset="cases.parquet")
    table = repeated_input({"expected": "refund"})
    table = table.append_column("id", [[f"c{i}" for i in range(ROWS)]])
    pq.write_table(table, golden / "cases.parquet", compression="zstd", store_schema=False)
    print("golden Parquet, validate:", measure(["validate", "decflow.yaml"], golden,
                                               options.src))

    records = work / "records"
    contract(records)
    pq.write_table(repeated_input(RECORD), records / "records.parquet", compression="zstd",
                   store_schema=False)
    print("records Parquet, check:", measure(
        ["check", "decflow.yaml", "-d", "records.parquet", "--store", str(records / "store")],
        records, options.src))

    answer = work / "answer"
    server = serve_lists()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    contract(answer, backend={"provider": "http", "url": f"{url}/decide", "timeout_s": 60})
    (answer / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": f"case {i}", "expected": "refund"}) + "\n"
        for i in range(3)))
    print("60 MB answer of empty lists, test:", measure(
        ["test", "decflow.yaml", "--store", str(answer / "store")], answer, options.src))
    server.shutdown()


if __name__ == "__main__":
    main()
