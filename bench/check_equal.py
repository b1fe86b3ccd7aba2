"""Before/after: the same production checks run by two decflow source trees give the same
report.json (run ids, creation times and store paths masked) and the same error lines.

Runs `decflow check` from each tree (`PYTHONPATH=TREE/src`) on the refund example's records
(JSONL, with and without its drift baseline), on Parquet records generated as
`check_bench.py --continuous` does (one file of 250k rows: segments exact, the whole input
sketched; a folder of three partitions), on inputs the check refuses (a repeated id across
partitions, an invalid row, an unusable segment value), and on any `--large` files (the
10M-row benchmark file), and compares every value of the two reports exactly.

usage: python bench/check_equal.py BEFORE_TREE AFTER_TREE [--large FILE.parquet ...]
       (a tree of an earlier commit: `git archive COMMIT src | tar -x -C /tmp/before`)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_bench import records

ROOT = Path(__file__).resolve().parents[1]
REFUND = ROOT / "tests/fixtures/reference/decguard-examples/refund"
CONTRACT = REFUND / "decguard.yaml"
MASKED = ("created_at", "run")  # when, and the run's id and store: not what was measured


def parquet_records(n: int, seed: int, prefix: str = "") -> pl.DataFrame:
    return records(n, seed=seed, continuous=True).with_columns(
        id=pl.lit(prefix) + pl.col("id"),
        metadata_json=pl.lit('{"locale":"') + pl.col("locale") + pl.lit('"}'),
        timestamp=pl.col("timestamp").str.to_datetime(time_zone="UTC"),
    ).drop("locale")


def inputs(work: Path) -> list[tuple[str, list[str]]]:
    """(name, check arguments after the contract) of every case."""
    one = work / "one.parquet"
    parquet_records(250_000, 1).write_parquet(one, row_group_size=100_000)
    folder = work / "parts"
    folder.mkdir()
    for p in range(3):
        parquet_records(120_000, 10 + p, f"p{p}-").write_parquet(
            folder / f"part-{p}.parquet", row_group_size=50_000)
    repeated = work / "repeated"
    repeated.mkdir()
    for p in range(2):  # the same ids in both partitions
        parquet_records(20_000, 20 + p).write_parquet(repeated / f"part-{p}.parquet")
    invalid = work / "invalid.parquet"
    frame = parquet_records(30_000, 3)
    frame.with_columns(latency_ms=pl.when(pl.int_range(pl.len()) == 21_345).then(-1.0)
                       .otherwise(pl.col("latency_ms"))).write_parquet(invalid)
    segment = work / "segment.parquet"
    frame.with_columns(metadata_json=pl.when(pl.int_range(pl.len()) == 777)
                       .then(pl.lit('{"locale":[1]}')).otherwise(pl.col("metadata_json"))
                       ).write_parquet(segment)
    return [
        ("refund JSONL", ["-d", str(REFUND / "production.jsonl")]),
        ("refund drift JSONL vs baseline", ["-d", str(REFUND / "production-drift.jsonl"),
                                            "--baseline", str(REFUND / "production.jsonl")]),
        ("250k Parquet", ["-d", str(one)]),
        ("3 Parquet partitions vs 250k baseline", ["-d", str(folder), "--baseline", str(one)]),
        ("repeated ids across partitions", ["-d", str(repeated)]),
        ("invalid row", ["-d", str(invalid)]),
        ("unusable segment value", ["-d", str(segment)]),
    ]


def check(tree: Path, arguments: list[str], work: Path) -> tuple[int, Any, str]:
    """(exit code, the report or None, the last line of stderr) of one check."""
    store, report = work / "store", work / "report.json"
    shutil.rmtree(store, ignore_errors=True)
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "decflow", "check", str(CONTRACT), *arguments,
         "--store", str(store), "-o", str(report), "-f", "json"],
        capture_output=True, text=True, env=env, check=False)
    shutil.rmtree(store, ignore_errors=True)
    lines = done.stderr.strip().splitlines()
    loaded = json.loads(report.read_text()) if report.exists() else None
    return done.returncode, masked(loaded), lines[-1] if lines else ""


def masked(report: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if report is None else {k: "…" if k in MASKED else v for k, v in report.items()}


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{where}: keys {list(a)} vs {list(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} vs {b!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--large", nargs="*", default=[])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="check-equal-"))
    failed = 0
    try:
        cases = inputs(work) + [(Path(f).name, ["-d", f]) for f in args.large]
        for name, arguments in cases:
            before = check(args.before, arguments, work)
            after = check(args.after, arguments, work)
            found = [f"exit {before[0]} vs {after[0]}"] if before[0] != after[0] else []
            found += differences(before[1], after[1])
            if before[2] != after[2] and before[1] is None:
                found.append(f"error {before[2]!r} vs {after[2]!r}")
            failed += bool(found)
            outcome = "equal" if not found else f"{len(found)} differ: {found[:5]}"
            shown = before[2] if before[1] is None else f"report, exit {before[0]}"
            print(f"{name}: {outcome} ({shown})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
