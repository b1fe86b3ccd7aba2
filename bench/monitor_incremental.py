"""How a monitor's run cost grows with its history: a day of refund records added at a
time (scripts/refund_records.py, hourly Parquet partitions, labels a day later), then one
`decflow monitor` run, for DAYS days; then a run with nothing new. Prints, per run, the wall
time, the partitions and bytes it read (from its JSON report) and the history it holds.

usage: python bench/monitor_incremental.py [--days 30] [--per-hour 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "contracts" / "refund-monitor" / "decflow.yaml"


def monitor(folder: Path) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "decflow", "monitor", str(CONTRACT), "-d",
         str(folder / "records"), "--labels", str(folder / "labels"), "--baseline",
         str(folder / "baseline"), "--store", str(folder / "store"), "-f", "json"],
        capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    report: dict[str, object] = json.loads(done.stdout)
    return wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--per-hour", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="decflow-monitor-bench-"))
    print("| run | days held | partitions read | bytes read | records read | windows "
          "judged | wall s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for day in range(1, args.days + 2):
        if day <= args.days:  # the last run finds nothing new
            subprocess.run([sys.executable, str(ROOT / "scripts" / "refund_records.py"),
                            str(folder), "--days", str(day), "--per-hour",
                            str(args.per_hour)], check=True, capture_output=True)
        wall, report = monitor(folder)
        read = report["this_run"]
        assert isinstance(read, dict)
        print(f"| {day} | {min(day, args.days)} | {len(read['new']) + len(read['rewritten'])} "
              f"| {read['bytes_read']:,} | {read['records_read']:,} "
              f"| {len(report['checked'])} | {wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()
