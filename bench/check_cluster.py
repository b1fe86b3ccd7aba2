"""Benchmark `decflow check` fanned out over a 2-worker Dask cluster against one process.

Writes N records as P Parquet partitions (random distributions, as `check_bench.py
--continuous`; ids distinct across partitions) under a work folder, starts a Prefect server
and a local Dask cluster (2 worker processes, 1 thread each) on 127.0.0.1, and runs

1. `decflow check -d FOLDER --store STORE --task-runner dask --dask-address ADDR`
   (one records task per unit on the workers), and
2. the same check without Prefect (`--no-prefect`: units on all cores of this machine),

each as a fresh process under `/usr/bin/time -v`. Prints wall, CPU and peak RSS of each,
the peak RSS and CPU seconds of each Dask worker (read from the workers after the run),
whether counts, sums and rates are equal and the percentiles within the stated bound, the
fan-out's rows per second, and its cost per billion rows at `--price` dollars per
vCPU-hour, extrapolated from the cost of one partition: the cluster's vCPUs held for the
run's wall time (what renting them costs), and the workers' CPU seconds alone (what a
pay-per-use pool would bill), each divided by the partitions and scaled to 1e9 rows.

usage: python bench/check_cluster.py [--rows 100000000] [--partitions 20] [--keep]
                                     [--price 0.05]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_bench import CONTRACT, measure, records

ROW_GROUP = 1_000_000


def write_partitions(folder: Path, rows: int, partitions: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    per = rows // partitions
    paths = []
    for p in range(partitions):
        path = folder / f"part-{p:03d}.parquet"
        paths.append(path)
        if path.exists():
            continue
        frame = records(per, seed=100 + p, continuous=True).with_columns(
            id=pl.lit(f"p{p}-") + pl.col("id"),
            metadata_json=pl.lit('{"locale":"') + pl.col("locale") + pl.lit('"}'),
            timestamp=pl.col("timestamp").str.to_datetime(time_zone="UTC"),
        ).drop("locale")
        frame.write_parquet(path.with_suffix(".tmp"), row_group_size=ROW_GROUP)
        path.with_suffix(".tmp").rename(path)
        print(f"wrote {path} ({per:,} rows)", flush=True)
    return paths


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_prefect(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    import httpx

    for _ in range(240):
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return server, api
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("the Prefect server did not start")


def _worker_usage() -> tuple[int, float]:
    """The worker's own peak resident set in kB (VmHWM) and its CPU seconds. Not
    `ru_maxrss`: a spawned worker's starts from this process's size when it forked (2.9 GB
    after writing the partitions), whatever the worker itself used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]), cpu
    return usage.ru_maxrss, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--work", type=Path, default=Path("/tmp/decflow-check-cluster"))
    parser.add_argument("--keep", action="store_true", help="keep the generated partitions")
    parser.add_argument("--price", type=float, default=0.05,
                        help="dollars per vCPU-hour for the cost per billion rows")
    args = parser.parse_args()
    import distributed

    folder = args.work / f"logs-{args.rows}"
    write_partitions(folder, args.rows, args.partitions)
    home = Path(tempfile.mkdtemp(prefix="prefect-home-"))
    server, api = start_prefect(home)
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_HOME": str(home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    os.environ.update({k: env[k] for k in ("PREFECT_API_URL", "PREFECT_HOME")})
    store = args.work / "store"
    shutil.rmtree(store, ignore_errors=True)
    out = args.work / "reports"
    out.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "decflow", "check", str(CONTRACT), "-d", str(folder),
            "-f", "json"]
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address=None,
                                      memory_limit=0) as cluster, \
                distributed.Client(cluster) as client:
            before = client.run(_worker_usage)
            dask = measure([*base, "--store", str(store), "-o", str(out / "dask.json"),
                            "--task-runner", "dask", "--dask-address",
                            cluster.scheduler_address], env=env)
            workers = client.run(_worker_usage)
        direct_store = args.work / "store-direct"  # fresh: a default store could hit a cache
        shutil.rmtree(direct_store, ignore_errors=True)
        single = measure([*base, "--no-prefect", "--store", str(direct_store),
                          "-o", str(out / "single.json")], env=env)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)
    fanned = json.loads((out / "dask.json").read_text())
    alone = json.loads((out / "single.json").read_text())
    print("| run | wall s | CPU s | peak RSS MB | exit |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, m in (("2 Dask workers (client process)", dask),
                    ("direct, no Prefect (largest process)", single)):
        print(f"| {name} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['rss_mb']:.0f} | "
              f"{m['exit']} |")
    for address, (kb, cpu) in sorted(workers.items()):
        print(f"| Dask worker {address} (peak RSS, CPU s of the check) | | "
              f"{cpu - before[address][1]:.1f} | {kb / 1024:.0f} | |")
    worker_cpu = sum(cpu - before[a][1] for a, (_, cpu) in workers.items())
    cost(args.rows, args.partitions, float(dask["wall_s"]), len(workers), worker_cpu,
         args.price)
    print(f"store: {sum(f.stat().st_size for f in store.rglob('*') if f.is_file()) / 1e6:.1f} "
          f"MB for {sum(f.stat().st_size for f in folder.glob('*.parquet')) / 1e6:.0f} MB "
          "of input")
    compare(fanned, alone)
    if not args.keep:
        shutil.rmtree(folder)
    shutil.rmtree(store, ignore_errors=True)


def cost(rows: int, partitions: int, wall: float, vcpus: int, worker_cpu: float,
         price: float) -> None:
    """Rows per second and dollars per billion rows, from one partition's share."""
    per_partition = rows / partitions
    held = wall * vcpus / partitions / 3600 * price  # the cluster's vCPUs for the run
    used = worker_cpu / partitions / 3600 * price  # the workers' CPU time alone
    scale = 1e9 / per_partition
    print(f"{rows / wall:,.0f} rows/s on {vcpus} workers; per partition of "
          f"{per_partition:,.0f} rows: {wall * vcpus / partitions:.1f} vCPU-s held, "
          f"{worker_cpu / partitions:.1f} worker CPU-s; cost per billion rows at "
          f"${price}/vCPU-hour: ${held * scale:.3f} (vCPUs held), ${used * scale:.3f} "
          "(worker CPU time)")


def compare(fanned: dict, alone: dict) -> None:
    """Counts, sums and rates equal; percentiles equal or within the stated bound."""
    bound = fanned["percentiles"]["relative_error"]
    differing = []
    worst = 0.0

    def walk(a: object, b: object, where: str) -> None:
        nonlocal worst
        if isinstance(a, dict) and isinstance(b, dict):
            for key in a.keys() | b.keys():
                walk(a.get(key), b.get(key), f"{where}.{key}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{where}[{i}]")
        elif a != b:
            if where.rsplit(".", 1)[-1] in ("p50", "p95") and isinstance(a, float):
                worst = max(worst, abs(a - b) / abs(b))
            else:
                differing.append(where)

    for key in ("metrics", "segments", "checks", "status", "exit_code", "drift"):
        walk(fanned[key], alone[key], key)
    print(f"fan-out vs one process: {len(differing)} differing exact values "
          f"{differing[:5]}; largest relative percentile difference {worst:.2e} "
          f"(stated bound {bound})")
    print(f"n_records {fanned['dataset']['n_records']:,}; sketched: "
          f"{', '.join(fanned['percentiles']['sketched'][:3])}, …")


if __name__ == "__main__":
    main()
