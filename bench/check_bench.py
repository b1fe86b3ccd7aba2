"""Benchmark `decflow check` on generated production records (JSONL and Parquet).

Generates refund-like records under a work folder (default /tmp/decflow-check-bench), then
runs each check in a fresh process under `/usr/bin/time -v` and reports wall time, CPU
seconds (user + sys) and peak RSS, side by side in one run:

- `decflow`: the command `decflow check CONTRACT -d RECORDS --store STORE` (the direct
  path: it always stores its stages and run; a fresh store every time, so every stage is
  written; the store's size and what it holds are printed after). decflow's modules are
  byte-compiled first, as an installed package's are (an editable install under
  PYTHONDONTWRITEBYTECODE=1 would compile every module again at every start);
- for Parquet, a bare polars lazy scan computing the same groupings on the same file
  (`bare_scan.py`: counts, correct, mean and p95 of confidence and latency, confidence
  bins, per-segment stats, distinct ids);
- with `--duckdb`, for Parquet, DuckDB computing the same groupings in SQL on the same file
  (`duckdb_scan.py`; `pip install duckdb`, or the `bench` extra);
- with `--before TREE`, the same `decflow check` from another source tree (`TREE/src` on
  the path, e.g. `git archive COMMIT src | tar -x -C TREE`), in the same rotation;
- with `--decguard PATH`, DecGuard 0.1.1 (installed in a throwaway environment) on the
  same JSONL files.

usage: python bench/check_bench.py [--sizes 1000000 10000000] [--formats jsonl parquet]
                                   [--decguard /tmp/decguard-venv/bin/decguard] [--decguard-max N]
                                   [--continuous] [--repeat N] [--duckdb] [--before TREE]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "tests/fixtures/reference/decguard-examples/refund/decguard.yaml"
LABELS = ("refund", "reject", "review")
# The refund mock's distributions: realistic repeats of a few confidences.
DISTRIBUTIONS = np.array(
    [[0.96, 0.01, 0.03], [0.9, 0.02, 0.08], [0.05, 0.85, 0.1], [0.03, 0.93, 0.04],
     [0.2, 0.15, 0.65]]
)
BARE = Path(__file__).resolve().parent / "bare_scan.py"
DUCKDB = Path(__file__).resolve().parent / "duckdb_scan.py"


def records(n: int, seed: int = 0, continuous: bool = False) -> pl.DataFrame:
    """n valid records (every optional field filled, three locales), built column-wise.
    `continuous` draws every distribution at random (almost no repeated confidences)
    instead of cycling through the refund mock's five."""
    rng = np.random.default_rng(seed)
    if continuous:
        raw = rng.random((n, len(LABELS))) ** 3
        probs = raw / raw.sum(axis=1, keepdims=True)
    else:
        probs = DISTRIBUTIONS[np.arange(n) % len(DISTRIBUTIONS)]
    selected = np.array(LABELS)[probs.argmax(axis=1)]
    actions = np.array(["accept", "fallback", "human_review", "abstain"])[rng.integers(0, 4, n)]
    seconds = rng.integers(0, 86_400 * 30, n)
    return pl.DataFrame(
        {
            "id": pl.Series([f"r{i}" for i in range(n)]),
            "timestamp": pl.Series(seconds * 1_000_000, dtype=pl.Int64)
            .cast(pl.Datetime("us", "UTC"))
            .dt.offset_by("56y")
            .dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "decision": "refund_request",
            "input": "The blender arrived damaged.",
            "probabilities": pl.DataFrame(
                {label: probs[:, i] for i, label in enumerate(LABELS)}
            ).to_struct(),
            "selected": selected,
            "backend": "openjev",
            "model": "refund-v1",
            "outcome": np.array(LABELS)[rng.integers(0, 3, n)],
            "action": actions,
            "fallback": actions == "fallback",
            "latency_ms": rng.random(n) * 380 + 20
            if continuous
            else rng.integers(20, 400, n).astype(np.float64),
            "cost": np.round(rng.random(n) * 0.01, 4),
            "locale": np.array(["en", "it", "de"])[rng.integers(0, 3, n)],
        }
    )


def write_inputs(
    n: int, folder: Path, formats: list[str], continuous: bool = False
) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    kind = "continuous" if continuous else "records"
    paths = {fmt: folder / f"{kind}-{n}.{fmt}" for fmt in formats}
    if all(p.exists() for p in paths.values()):
        return paths
    frame = records(n, continuous=continuous)
    if "jsonl" in paths and not paths["jsonl"].exists():
        frame.with_columns(pl.struct(locale="locale").alias("metadata")).drop(
            "locale"
        ).write_ndjson(paths["jsonl"])
    if "parquet" in paths and not paths["parquet"].exists():
        frame.with_columns(
            metadata_json=pl.lit('{"locale":"') + pl.col("locale") + pl.lit('"}'),
            timestamp=pl.col("timestamp").str.to_datetime(time_zone="UTC"),
        ).drop("locale").write_parquet(paths["parquet"], row_group_size=1_000_000)
    return paths


def measure(command: list[str], env: dict[str, str] | None = None) -> dict[str, float | str]:
    """Run under /usr/bin/time -v: wall s, CPU s (user + sys), peak RSS MB, stdout, and the
    machine's 1-minute load average just before."""
    load = os.getloadavg()[0]
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command], capture_output=True, text=True, check=False, env=env
    )

    def field(name: str) -> str:
        found = re.search(rf"{re.escape(name)}: (.+)", done.stderr)
        return found.group(1).strip() if found else "0"

    minutes, _, seconds = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").rpartition(":")
    return {
        "wall_s": (float(minutes.split(":")[-1]) * 60 if minutes else 0.0) + float(seconds),
        "cpu_s": float(field("User time (seconds)")) + float(field("System time (seconds)")),
        "rss_mb": int(field("Maximum resident set size (kbytes)")) / 1024,
        "exit": done.returncode,
        "load": load,
        "out": done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--formats", nargs="+", default=["jsonl", "parquet"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/decflow-check-bench"))
    parser.add_argument("--decguard", help="path to a DecGuard 0.1.1 `decguard` executable")
    parser.add_argument("--decguard-max", type=int, default=1_000_000,
                        help="largest size to run DecGuard on (it keeps every record)")
    parser.add_argument("--continuous", action="store_true",
                        help="random distributions (distinct confidences and latencies)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the tools in turn this many times; medians (and ranges)")
    parser.add_argument("--duckdb", action="store_true",
                        help="also DuckDB computing the same groupings (Parquet)")
    parser.add_argument("--before", type=Path,
                        help="also `decflow check` from this source tree (its src/ on the path)")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "src" / "decflow", quiet=1)
    if args.before:
        compileall.compile_dir(args.before / "src" / "decflow", quiet=1)
    # this tree's decflow, whatever the environment has installed
    own = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    print("| records | format | tool | wall s | CPU s | peak RSS MB | load avg | result |")
    print("| ---: | --- | --- | ---: | ---: | ---: | --- | --- |")
    notes: dict[Path, str] = {}
    for n in args.sizes:
        paths = write_inputs(n, args.work, args.formats, args.continuous)
        for fmt, path in paths.items():
            store = args.work / f"store-{fmt}-{n}"
            shutil.rmtree(store, ignore_errors=True)
            check = [sys.executable, "-m", "decflow", "check", str(CONTRACT), "-d", str(path),
                     "--store", str(store)]
            runs: list[tuple[str, list[str], dict[str, str]]] = [("decflow", check, own)]
            if args.before:
                before = {**os.environ, "PYTHONPATH": str(args.before / "src")}
                runs.append((f"decflow before ({args.before.name})", check, before))
            if fmt == "parquet":
                runs.append(("bare polars scan", [sys.executable, str(BARE), str(path)], own))
            if args.duckdb and fmt == "parquet":
                runs.append(("DuckDB SQL", [sys.executable, str(DUCKDB), str(path)], own))
            if args.decguard and fmt == "jsonl" and n <= args.decguard_max:
                runs.append(("DecGuard 0.1.1", [args.decguard, "check", str(CONTRACT), "-d",
                                                str(path)], own))
            measured: dict[str, list[dict[str, float | str]]] = {tool: [] for tool, *_ in runs}
            for _ in range(args.repeat):  # in turn, so the machine's load hits every tool
                for tool, command, env in runs:
                    if tool.startswith("decflow") and store.exists():
                        notes[path] = store_note(store, path)
                        shutil.rmtree(store)  # every run starts from an empty store
                    measured[tool].append(measure(command, env))
            for tool, *_ in runs:
                m = measured[tool]
                result = (m[-1]["out"] if not tool.startswith(("decflow", "DecGuard"))
                          else f"exit {m[-1]['exit']}")
                loads = [float(r["load"]) for r in m]
                print(f"| {n:,} | {fmt} | {tool} | {_median(m, 'wall_s')} | "
                      f"{_median(m, 'cpu_s')} | {max(float(r['rss_mb']) for r in m):.0f} | "
                      f"{min(loads):.1f}–{max(loads):.1f} | {result} |", flush=True)
            if "DuckDB SQL" in measured:
                print(ratios(measured["decflow"], measured["DuckDB SQL"], "DuckDB"))
            if store.exists():
                notes[path] = store_note(store, path)
                shutil.rmtree(store)
    for note in notes.values():
        print(note)


def _median(runs: list[dict[str, float | str]], key: str) -> str:
    values = sorted(float(r[key]) for r in runs)
    middle = values[len(values) // 2] if len(values) % 2 else (
        values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    spread = f" ({values[0]:.2f}–{values[-1]:.2f})" if len(values) > 1 else ""
    return f"{middle:.2f}{spread}"


def ratios(ours: list[dict[str, float | str]], theirs: list[dict[str, float | str]],
           name: str) -> str:
    """decflow's wall time over another tool's, run by run (each pair ran back to back)."""
    pairs = sorted(float(a["wall_s"]) / float(b["wall_s"]) for a, b in zip(ours, theirs,
                                                                            strict=True))
    middle = pairs[len(pairs) // 2] if len(pairs) % 2 else (
        pairs[len(pairs) // 2 - 1] + pairs[len(pairs) // 2]) / 2
    return (f"decflow / {name} wall time, pair by pair: median {middle:.2f}x "
            f"({', '.join(f'{r:.2f}' for r in pairs)})")


def store_note(store: Path, source: Path) -> str:
    """What a store holds after a check, and its size against the input's."""
    sizes: dict[str, int] = {}
    for file in store.rglob("*"):
        if file.is_file():
            kind = "id hashes" if file.name.startswith("ids-") else (
                "statistics" if file.name.startswith("part-") else "manifests")
            sizes[kind] = sizes.get(kind, 0) + file.stat().st_size
    total = sum(sizes.values())
    held = ", ".join(f"{kind} {size / 1e6:.1f} MB" for kind, size in sorted(sizes.items()))
    return (f"store after {source.name}: {total / 1e6:.1f} MB = "
            f"{100 * total / source.stat().st_size:.1f} % of the input ({held})")


if __name__ == "__main__":
    main()
