"""Benchmark contract runs with the mock backend, decflow side by side with DecGuard 0.1.1.

usage: python bench/contract_runs.py [--decguard PATH] [--sizes 10000,100000] [--decguard-max N]

Runs, for each size N (the refund example's cases repeated under new ids):
  decflow test        (golden mode)
  decflow test --all  (golden + six properties, ~11 transformed requests per case)
  decguard test / test --all on the same files, when --decguard is given
and prints wall seconds, CPU seconds (user+sys) and peak RSS, measured with GNU time.
DecGuard runs in its own throwaway environment (pip install decguard==0.1.1); its code is
neither read nor copied.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "contracts" / "refund" / "decflow.yaml"


def measure(command: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MB, exit code) of one command."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%e %U %S %M", "-o", timing.name, *command],
            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        )
        wall, user, system, rss_kb = timing.read().split()[-4:]
    return float(wall), float(user) + float(system), int(rss_kb) / 1024, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decguard", help="path to a decguard 0.1.1 executable")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--decguard-max", type=int, default=10000,
                        help="largest size DecGuard is run at (it holds every case in memory)")
    args = parser.parse_args()
    decflow = str(Path(sys.executable).with_name("decflow"))
    work = Path(tempfile.mkdtemp(prefix="decflow-bench-"))
    shutil.copytree(CONTRACT.parent, work / "refund")
    (work / "refund" / "decguard.yaml").write_bytes(CONTRACT.read_bytes())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'tool':<9} {'run':<12} {'cases':>7} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} exit")
    for size in [int(s) for s in args.sizes.split(",")]:
        data = work / f"refund-{size}.jsonl"
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_dataset.py"), str(size),
                        str(data)], check=True)
        for mode in (["test"], ["test", "--all"]):
            runs = [("decflow", [decflow, *mode, "refund/decflow.yaml", "-d", str(data),
                                 "--store", str(work / "store")])]
            if args.decguard and size <= args.decguard_max:
                runs.append(("decguard", [args.decguard, *mode, "refund/decguard.yaml",
                                          "-d", str(data)]))
            for tool, command in runs:
                wall, cpu, rss, code = measure(command, work)
                label = " ".join(mode[1:]) or "golden"
                print(f"{tool:<9} {label:<12} {size:>7} {wall:>8.2f} {cpu:>8.2f} "
                      f"{rss:>8.0f} {code}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
