"""Sequential runs with diagnostics against full runs (2,000 cases, planted model over HTTP).

The suites (`tests/support/planted.py`, `planted_diagnostics_contract`): `test --all` with
`min_accuracy: 0.85`, stability (4 draws a case, ε 0.05), blindness (0.9) and the religion
persona axis (4 pairs a case and their placebos, `max_flip_rate: 0.05`), plus the implicit
`max_error_rate: 0` of the run and of the axis: six gates, α/6 each. Flaky cases turn over
on every odd rerun (both of their rerun pairs flip); biased cases' persona arms turn over
when the persona volunteers at a mosque, synagogue or gurdwara (about 0.6 of cross pairs
straddle those; placebos never do). Half the cases expect `bad`, so no suite is blind.

`calls`: a suite that clearly passes (accuracy 0.95, 1 % flaky, no bias), one that clearly
fails (30 % flaky, 30 % biased) and one at the limits (5 % flaky, ≈ 0.05 excess); the full
run once per suite, the sequential run's decisions over `--seeds` case orders (median calls
and cases), replayed on the full run's per-case results (the planted model answers a
request the same in any order), the first `--piped` orders also through the pipeline, which
must send the same cases.

`agreement`: suites at, just below and just above the stability and persona limits, 200
orders each: the share of orders whose status differs from the full run's, and of decided
gates whose decision does. `grey`: the same for suites whose stability rate lies between ε
and where the full test on 2,000 cases decides (the stability gate settles the full run's
verdict there), and one whose persona excess does (a verdict about the model: its status
may differ).

    python bench/sequential_diagnostics.py calls --seeds 20
    python bench/sequential_diagnostics.py agreement --seeds 200
    python bench/sequential_diagnostics.py grey --seeds 200
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

from sequential_bench import Replay, statuses
from tests.support.planted import planted_diagnostics_contract
from tests.support.servers.planted import PlantedServer

from decflow.pipeline.contract_run.runner import run_contract, stored_manifests
from decflow.pipeline.contract_run.sequential.calls import case_order
from decflow.pipeline.contract_run.sequential.diagnostics import repeated_inputs
from decflow.pipeline.contract_run.sequential.gates import Design
from decflow.pipeline.spec import RunSpec
from decflow.store.store import Store

CASES = 2000
ALPHA = 0.05


def run(contract: Path, store: Path, run_id: str, seed: int | None, batch: int) -> \
        tuple[dict[str, Any], float]:
    sequential = None if seed is None else {
        "alpha": ALPHA, "max_cases": None, "batch": batch, "seed": seed, "zero_limit": 0.02}
    spec = RunSpec(contract_path=str(contract), store_url=str(store), run_id=run_id,
                   mode="all", sequential=sequential, healthcheck=False)
    started = time.perf_counter()
    report = run_contract(spec, Store(str(store)))
    return report, time.perf_counter() - started


class Suite:
    """A full run of a planted suite and what replaying its orders needs."""

    def __init__(self, root: Path, name: str, url: str, batch: int, **rates: float) -> None:
        self.contract = planted_diagnostics_contract(root / name, CASES, url, **rates)
        self.store = root / "store"
        self.full, self.seconds = run(self.contract, self.store, f"full-{name}", None, batch)
        stored = Store(str(self.store))
        manifests = stored_manifests(stored, self.full["run"]["id"])
        requests = stored.read(manifests["requests"], ["case_id"])
        self.per_case = dict(requests.group_by("case_id").len().iter_rows())
        self.cases = stored.read(manifests["cases"])
        # The suite has no metamorphic property.
        design = Design(CASES, ALPHA, 0.02, {}, repeated_inputs(self.cases))
        self.replayed = Replay(self.full, self.store, self.contract, batch, design)

    def replay(self, seed: int) -> tuple[dict[str, Any], int, int, str]:
        """(states, cases sent, calls made, status) of case order `seed`."""
        states, sent, status = self.replayed(seed)
        order = case_order(self.cases, seed)[:sent]
        return states, sent, sum(self.per_case[c] for c in order), status


def calls(seeds: int, batch: int, piped: int, root: Path, url: str) -> None:
    suites = {
        "clearly passes (accuracy 0.95, 1 % flaky, no bias)":
            {"wrong": 0.05, "flaky": 0.01, "biased": 0.0},
        "clearly fails (30 % flaky, 30 % biased)": {"wrong": 0.05, "flaky": 0.3, "biased": 0.3},
        "at the limits (5 % flaky, 8.3 % biased)":
            {"wrong": 0.05, "flaky": 0.05, "biased": 0.083},
    }
    print(f"| suite ({CASES} cases) | full: calls, s, status | sequential (median of {seeds} "
          "orders): calls, cases | calls saved | same status | pipeline = replay |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for index, (name, rates) in enumerate(suites.items()):
        suite = Suite(root, f"calls-{index}", url, batch, **rates)
        full_calls = sum(suite.per_case.values())
        made, sent, same, matched = [], [], 0, 0
        for seed in range(seeds):
            _states, cases_sent, calls_made, status = suite.replay(seed)
            made.append(calls_made)
            sent.append(cases_sent)
            same += status == suite.full["status"]
            if seed < piped:
                seq, _ = run(suite.contract, suite.store, f"seq-{index}-{seed}", seed, batch)
                matched += (seq["sequential"]["cases_sent"] == cases_sent
                            and seq["sequential"]["calls_made"] == calls_made
                            and seq["status"] == status)
        median = statistics.median(made)
        print(f"| {name} | {full_calls}, {suite.seconds:.1f} s, {suite.full['status']} | "
              f"{median:g}, {statistics.median(sent):g} | {full_calls / median:.1f}x | "
              f"{same}/{seeds} | {matched}/{piped} |", flush=True)


AGREEMENT = {
    "at the limits (5 % flaky, 8.3 % biased)": {"flaky": 0.05, "biased": 0.083},
    "just below (4 % flaky, 5 % biased)": {"flaky": 0.04, "biased": 0.05},
    "just above (6 % flaky, 11.7 % biased)": {"flaky": 0.06, "biased": 0.117},
}
# Stability between ε and where the full test on 2,000 cases decides (it holds below 4.02 %
# and fails above 6.03 % flaky cases, all or nothing), the persona axis clearly fair; and a
# persona excess in its grey zone (a verdict about the model there: the status may differ).
GREY = {
    "stability grey, above (5.5 % flaky)": {"flaky": 0.055, "biased": 0.0},
    "stability grey, above (5.9 % flaky)": {"flaky": 0.059, "biased": 0.0},
    "stability grey, below (4.5 % flaky)": {"flaky": 0.045, "biased": 0.0},
    "stability grey, below (4.2 % flaky)": {"flaky": 0.042, "biased": 0.0},
    "persona grey (1 % flaky, 10 % biased)": {"flaky": 0.01, "biased": 0.1},
}


def agreement(seeds: int, batch: int, piped: int, root: Path, url: str,
              suites: dict[str, dict[str, float]]) -> None:
    piped = min(piped, seeds)
    tolerance = ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / seeds)
    print(f"bound per suite: alpha + binomial 99 % tolerance over {seeds} seeds = "
          f"{tolerance:.4f}; batch {batch}; the first {piped} seeds also through the pipeline")
    print("| suite | full: status, flip share, excess | status differs | decided gates "
          "differing | median cases sent | pipeline = replay |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for index, (name, rates) in enumerate(suites.items()):
        suite = Suite(root, f"agree-{len(name)}-{index}", url, batch, wrong=0.05, **rates)
        expected = statuses(suite.full)
        differs = gates_differ = decided = matched = 0
        sent = []
        for seed in range(seeds):
            states, cases_sent, _calls, status = suite.replay(seed)
            differs += status != suite.full["status"]
            sent.append(cases_sent)
            for gate, state in states.items():
                if state.decision is not None:
                    decided += 1
                    gates_differ += state.decision != expected[gate]
            if seed < piped:
                seq, _ = run(suite.contract, suite.store, f"agree-{index}-{seed}", seed, batch)
                matched += (seq["status"] == status
                            and seq["sequential"]["cases_sent"] == cases_sent)
        diagnostics = suite.full["diagnostics"]
        axis = diagnostics["counterfactual"]["axes"][0]
        print(f"| {name} | {suite.full['status']}, "
              f"{diagnostics['stability']['flip_rate']:.4f}, {axis['excess']:.4f} | "
              f"{differs}/{seeds} ({differs / seeds:.3f}) | {gates_differ}/{decided} | "
              f"{statistics.median(sent):g} | {matched}/{piped} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("calls", "agreement", "grey"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--piped", type=int, default=3)
    args = parser.parse_args()
    with PlantedServer() as server, tempfile.TemporaryDirectory(
            prefix="decflow-seq-diag-bench-") as folder:
        root, url = Path(folder), server.url("/decide")
        if args.what == "calls":
            calls(args.seeds, args.batch, args.piped, root, url)
        else:
            agreement(args.seeds, args.batch, args.piped, root, url,
                      AGREEMENT if args.what == "agreement" else GREY)


if __name__ == "__main__":
    main()
