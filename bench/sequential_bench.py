"""Sequential runs against full runs on the mock backend with planted rates (2,000 cases).

`calls`: `test --all` on a suite that clearly passes (accuracy 0.95 vs 0.85, flip rate 1 %
vs 5 %), one that clearly fails (accuracy 0.60, flip rate 20 %) and one exactly at both
limits; the full run once per suite, the sequential run over `--seeds` case orders; median
backend calls, cases sent, wall seconds and how often the status equals the full run's.

`agreement`: suites at, just below and just above both limits (accuracy 0.85 ± 0.01, flip
rate 0.05 ± 0.01), one full run each and a sequential run per case-order seed: the share of
seeds whose status differs from the full run's, and of decided gates whose decision does.

    python bench/sequential_bench.py calls --seeds 20
    python bench/sequential_bench.py agreement --seeds 200
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.planted import planted_contract

from decflow.pipeline.contract_run.runner import run_contract
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Store

CASES = 2000
ALPHA = 0.05


def run(contract: Path, store: Path, run_id: str, seed: int | None, batch: int) -> \
        tuple[dict[str, Any], float]:
    sequential = None if seed is None else {
        "alpha": ALPHA, "max_cases": None, "batch": batch, "seed": seed, "zero_limit": 0.02}
    spec = RunSpec(contract_path=str(contract), store_url=str(store), run_id=run_id,
                   mode="all", sequential=sequential)
    started = time.perf_counter()
    report = run_contract(spec, Store(str(store)))
    return report, time.perf_counter() - started


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["gate"]: c["status"] for c in report["checks"]}


def calls(seeds: int, batch: int, root: Path) -> None:
    suites = {"clearly passes": (0.05, 0.01), "clearly fails": (0.40, 0.20),
              "at the limits": (0.15, 0.05)}
    print(f"| suite ({CASES} cases) | full: calls, s, status | sequential (median of {seeds} "
          "orders): calls, cases, s | calls saved | same status |")
    print("| --- | --- | --- | ---: | ---: |")
    for name, (wrong, flips) in suites.items():
        contract = planted_contract(root / name.replace(" ", "-"), CASES, wrong=wrong,
                                    flips=flips)
        full, full_s = run(contract, root / "store", f"full-{name}", None, batch)
        full_calls = sum(1 for _ in full["results"]) * 2  # original + one reversed order
        made, sent, seconds, same = [], [], [], 0
        for seed in range(seeds):
            seq, seq_s = run(contract, root / "store", f"seq-{name}-{seed}", seed, batch)
            made.append(seq["sequential"]["calls_made"])
            sent.append(seq["sequential"]["cases_sent"])
            seconds.append(seq_s)
            same += seq["status"] == full["status"]
            assert seq["sequential"]["calls_full"] == full_calls
        median = statistics.median(made)
        print(f"| {name} | {full_calls}, {full_s:.1f} s, {full['status']} | {median:g}, "
              f"{statistics.median(sent):g}, {statistics.median(seconds):.1f} s | "
              f"{full_calls / median:.1f}x | {same}/{seeds} |")


def agreement(seeds: int, batch: int, root: Path) -> None:
    suites = {"at the limits": (0.15, 0.05), "just below (fails)": (0.16, 0.06),
              "just above (passes)": (0.14, 0.04)}
    tolerance = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / seeds)
    print(f"bound per suite: alpha + binomial 99 % tolerance over {seeds} seeds = "
          f"{tolerance:.4f}")
    print("| suite | full status | status differs | decided gates differing | "
          "median cases sent |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, (wrong, flips) in suites.items():
        contract = planted_contract(root / name.split()[0], CASES, wrong=wrong, flips=flips)
        full, _ = run(contract, root / "store", f"full-{name}", None, batch)
        expected = statuses(full)
        differs = gates_differ = decided = 0
        sent = []
        for seed in range(seeds):
            seq, _ = run(contract, root / "store", f"seq-{name}-{seed}", seed, batch)
            differs += seq["status"] != full["status"]
            sent.append(seq["sequential"]["cases_sent"])
            for gate in seq["sequential"]["gates"]:
                if gate["decision"] is not None:
                    decided += 1
                    gates_differ += ({"pass": "pass"}.get(gate["decision"], "fail")
                                     != expected[gate["gate"]])
        print(f"| {name} | {full['status']} | {differs}/{seeds} ({differs / seeds:.3f}) | "
              f"{gates_differ}/{decided} | {statistics.median(sent):g} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("calls", "agreement"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="decflow-seq-bench-") as folder:
        (calls if args.what == "calls" else agreement)(args.seeds, args.batch, Path(folder))


if __name__ == "__main__":
    main()
