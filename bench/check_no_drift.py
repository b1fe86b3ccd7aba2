"""No-drift production checks through the command line, point against evidence gating
(issue 34: "through the CLI, 6 of 12 no-drift checks FAILed").

For each seed, `scripts/refund_records.py` writes a day of refund decisions with their
outcomes and a baseline day of the same size, from one unchanged model (error rate 0.10;
nothing planted). `decflow check` then judges the day against the baseline twice, with
the refund-monitor contract's gates (segments locale and channel, `min_accuracy: 0.85`,
segment `min_accuracy: 0.8`, `max_ece_increase: 0.05`) and the issue's drift limits
(`max_confidence_tv_distance: 0.05`, `max_accuracy_drop: 0.02`): once with
`production.gating: point` (DecGuard's verdicts), once with `evidence`. Every FAIL is a
false alarm.

    PYTHONPATH=src .venv/bin/python bench/check_no_drift.py [--checks 40] [--rows 500 1000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "contracts" / "refund-monitor" / "decflow.yaml"
GENERATOR = ROOT / "scripts" / "refund_records.py"
DRIFT_LIMITS = {"max_confidence_tv_distance": 0.05, "max_accuracy_drop": 0.02}


def contract(folder: Path, gating: str) -> Path:
    """The refund-monitor contract with the issue's drift limits, gated `gating`."""
    document = yaml.safe_load(CONTRACT.read_text())
    document["production"]["gating"] = gating
    document["production"]["requirements"].update(DRIFT_LIMITS)
    path = folder / f"{gating}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def records(folder: Path, rows: int, seed: int) -> Path:
    """A day of `rows` decisions (rounded to whole hours) and a baseline day alike."""
    out = folder / f"rows{rows}-seed{seed}"
    subprocess.run([sys.executable, str(GENERATOR), str(out), "--days", "1", "--per-hour",
                    str(max(1, round(rows / 24))), "--baseline-days", "1", "--outcomes-inline",
                    "--seed", str(seed)], check=True, capture_output=True)
    return out


def check(contract_path: Path, data: Path, store: Path) -> str:
    report = data / f"{contract_path.stem}.json"
    done = subprocess.run([sys.executable, "-m", "decflow", "check", str(contract_path), "-d",
                           str(data / "records"), "--baseline", str(data / "baseline"),
                           "--store", str(store), "-f", "json", "-o", str(report)],
                          capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    status: str = json.loads(report.read_text())["status"]
    return status


def share(statuses: Counter[str], status: str) -> str:
    """`3 (10.0 %)` of the checks that ended `status`."""
    return f"{statuses[status]} ({100 * statuses[status] / statuses.total():.1f} %)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=40)
    parser.add_argument("--rows", type=int, nargs="+", default=[500, 1000])
    args = parser.parse_args()
    print("| rows (day / baseline) | checks | point FAIL | evidence FAIL | evidence WARN "
          "| evidence PASS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        point, evidence = contract(folder, "point"), contract(folder, "evidence")
        for rows in args.rows:
            found: dict[str, Counter[str]] = {"point": Counter(), "evidence": Counter()}
            for seed in range(args.checks):
                data = records(folder, rows, seed)
                for name, path in (("point", point), ("evidence", evidence)):
                    found[name][check(path, data, folder / "store")] += 1
            n = round(rows / 24) * 24
            print(f"| {n} / {n} | {args.checks} | {share(found['point'], 'fail')} | "
                  f"{share(found['evidence'], 'fail')} | {share(found['evidence'], 'warn')} | "
                  f"{share(found['evidence'], 'pass')} |", flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
