"""Sequential runs against full runs on the mock backend with planted rates (2,000 cases).

`calls`: `test --all` on a suite that clearly passes (accuracy 0.95 vs 0.85, flip rate 1 %
vs 5 %), one that clearly fails (accuracy 0.60, flip rate 20 %) and one exactly at both
limits; the full run once per suite, the sequential run over `--seeds` case orders; median
backend calls, cases sent, wall seconds and how often the status equals the full run's.

`agreement`: suites at, just below and just above both limits (accuracy 0.85 ± 0.01, flip
rate 0.05 ± 0.01), one full run each and a sequential run per case-order seed: the share of
seeds whose status differs from the full run's, and of decided gates whose decision does.
The sequential runs are the driver's own gate code replayed on the full run's per-case
results in each seed's order (the mock answers an input the same in any order); the first
seeds also run through the whole pipeline, which must decide identically.

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

import polars as pl
from tests.support.planted import planted_contract

from decflow.contracts import load_contract
from decflow.gates.checks import Check
from decflow.pipeline.contract_run.golden_section import originals
from decflow.pipeline.contract_run.runner import run_contract, stored_manifests
from decflow.pipeline.contract_run.sequential.calls import (
    Sent,
    batch_bounds,
    case_order,
    tracked_gates,
)
from decflow.pipeline.contract_run.sequential.gates import Design, GateState, advance, settled
from decflow.pipeline.contract_run.sequential.summary import (
    stored_diagnostics,
    stored_transformed,
)
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


class Replay:
    """The sequential driver's decisions for any case order, replayed on a full run's stored
    per-case results: the planted backends answer each request the same whatever the
    order, so this is what a sequential run with that order decides (the first seeds are
    also run through the pipeline and must match exactly). The stored tables are read
    once."""

    def __init__(self, full: dict[str, Any], store: Path, contract: Path, batch: int,
                 design: Design) -> None:
        stored = Store(str(store))
        manifests = stored_manifests(stored, full["run"]["id"])
        self.cases = stored.read(manifests["cases"])
        self.originals = originals(self.cases, stored.read(manifests["results"]))
        self.transformed, self.comparisons = stored_transformed(stored, manifests)
        self.bounds = batch_bounds(self.cases.height, batch)
        self.diagnostics = stored_diagnostics(stored, manifests, {"bounds": self.bounds})
        self.contract = load_contract(str(contract)).contract
        self.spec = RunSpec(contract_path=str(contract), store_url=str(store),
                            run_id="replay", mode="all")
        self.checks = [Check.from_dict(c) for c in full["checks"]]
        self.design = design

    def __call__(self, seed: int) -> tuple[dict[str, GateState], int, str]:
        """(the gates' states at the stop, cases sent, status) for case order `seed`."""
        order = case_order(self.cases, seed)
        position = pl.DataFrame({"case_id": order, "_order": range(len(order))})
        table = self.originals.join(position, on="case_id").sort("_order").drop("_order")
        tracked = tracked_gates(self.contract, self.spec, self.checks,
                                Sent(order, table, self.transformed, self.comparisons,
                                     self.diagnostics), self.design)
        states: dict[str, GateState] = {}
        sent = len(order)
        for bound in self.bounds:
            states = advance(states, tracked, bound, self.design)
            if bound < len(order) and settled(states, tracked) is not None:
                sent = bound
                break
        return states, sent, status_of([s.decision for s in states.values()])


def status_of(decisions: list[str | None]) -> str:
    if "fail" in decisions:
        return "fail"
    return "pass" if all(d == "pass" for d in decisions) else "warn"


def agreement(seeds: int, batch: int, root: Path, piped: int = 5) -> None:
    suites = {"at the limits": (0.15, 0.05), "just below (fails)": (0.16, 0.06),
              "just above (passes)": (0.14, 0.04)}
    tolerance = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / seeds)
    print(f"bound per suite: alpha + binomial 99 % tolerance over {seeds} seeds = "
          f"{tolerance:.4f}; batch {batch}; the first {piped} seeds also through the pipeline")
    print("| suite | full status | status differs | decided gates differing | "
          "median cases sent | pipeline = replay |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, (wrong, flips) in suites.items():
        contract = planted_contract(root / name.split()[0], CASES, wrong=wrong, flips=flips)
        full, _ = run(contract, root / "store", f"full-{name}", None, batch)
        expected = statuses(full)
        replay = Replay(full, root / "store", contract, batch,
                        Design(CASES, ALPHA, 0.02, {"option_order": 1}))
        differs = gates_differ = decided = same_as_pipeline = 0
        sent = []
        for seed in range(seeds):
            states, cases_sent, status = replay(seed)
            differs += status != full["status"]
            sent.append(cases_sent)
            for gate, state in states.items():
                if state.decision is not None:
                    decided += 1
                    gates_differ += state.decision != expected[gate]
            if seed < piped:
                seq, _ = run(contract, root / "store", f"seq-{name}-{seed}", seed, batch)
                same_as_pipeline += (seq["status"] == status
                                     and seq["sequential"]["cases_sent"] == cases_sent)
        print(f"| {name} | {full['status']} | {differs}/{seeds} ({differs / seeds:.3f}) | "
              f"{gates_differ}/{decided} | {statistics.median(sent):g} | "
              f"{same_as_pipeline}/{piped} |", flush=True)


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
