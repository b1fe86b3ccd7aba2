"""The harmful-shift alarm over 1,000 simulated monitors (issue 34).

Each monitor: a baseline of 10,000 labelled records at error rate 0.10, then 30 windows of
2,000 labelled records each, fed to `HarmfulShiftDetector` (T = 0.02, α = 0.05, horizon 365
windows unless stated). Scenarios:

- no shift (0.10 throughout), and the worst case the guarantee covers (0.12 = the baseline's
  true risk + T): the share of monitors with any alarm (the guarantee: ≤ α within 365
  windows, so ≤ α here);
- error rate 0.10 → 0.16 from window 10: windows from the change to the alarm; the same with
  labels arriving one window late (the alarm must name the same window, one run later); and
  a sequence over every record since deployment without forgetting (one product, threshold
  2/α), for comparison;
- a shift of confidences alone (0.9 → half 0.99, half 0.81, each as often right as
  confident: same error rate, lower Brier), per record, on both metrics;
- a harmful Brier shift (confidence 0.9, accuracy 0.9 → 0.84: Brier 0.09 → 0.138).

    PYTHONPATH=src .venv/bin/python bench/harmful_shift.py [--monitors 1000]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from decflow.metrics.harmful_shift import HarmfulShiftDetector, record_losses

WINDOWS = 30
PER_WINDOW = 2000
BASELINE = 10_000
CHANGE = 10
Window = Callable[[np.random.Generator, int], tuple[int, float]]


def counts(rates: list[float]) -> Window:
    """Error-rate windows: a binomial count of errors per window."""
    return lambda rng, w: (PER_WINDOW, float(rng.binomial(PER_WINDOW, rates[w])))


def records(metric: str, shifted: Callable[[int], bool], accuracy_after: float | None = None
            ) -> Window:
    """Per-record windows: confidence 0.9 and 90 % right; after the shift either half at
    0.99 and half at 0.81 (as often right as confident) or `accuracy_after` right."""
    def window(rng: np.random.Generator, w: int) -> tuple[int, float]:
        confidence = np.full(PER_WINDOW, 0.9)
        accuracy = confidence
        if shifted(w):
            if accuracy_after is None:
                confidence = np.where(rng.random(PER_WINDOW) < 0.5, 0.99, 0.81)
                accuracy = confidence
            else:
                accuracy = np.full(PER_WINDOW, accuracy_after)
        correct = rng.random(PER_WINDOW) < accuracy
        return PER_WINDOW, float(record_losses(metric, confidence, correct).sum())  # type: ignore[arg-type]
    return window


def baseline_loss(rng: np.random.Generator, metric: str) -> float:
    if metric == "error_rate":
        return float(rng.binomial(BASELINE, 0.10))
    correct = rng.random(BASELINE) < 0.9
    return float(record_losses(metric, np.full(BASELINE, 0.9), correct).sum())  # type: ignore[arg-type]


def monitor(rng: np.random.Generator, window: Window, *, metric: str = "error_rate",
            horizon: int = 365, delay: int = 0) -> tuple[int | None, int | None]:
    """(data window the alarm names, run it fired in); run r sees window r − delay."""
    state = HarmfulShiftDetector.start(metric, 0.02, 0.05, horizon,  # type: ignore[arg-type]
                                       BASELINE, baseline_loss(rng, metric))
    data = [window(rng, w) for w in range(WINDOWS)]
    for run in range(WINDOWS + delay):
        if run - delay >= 0:
            state = state.update(f"{run - delay:02d}", *data[run - delay])
        if state.alarm is not None:
            return int(state.alarm.window), run
    return None, None


def since_deployment(rng: np.random.Generator, rates: list[float]) -> int | None:
    """The window a single product since deployment (no forgetting) crosses 2/α at, with
    the detector's own alternatives and baseline bound (for comparison only)."""
    start = HarmfulShiftDetector.start("error_rate", 0.02, 0.05, 365, BASELINE,
                                       float(rng.binomial(BASELINE, 0.10)))
    theta = start.theta
    q = theta + (1 - theta) * 2.0 ** (-np.arange(1, 21) / 2.0)
    lam = np.log(q * (1 - theta)) - np.log(theta * (1 - q))
    psi = np.log1p(theta * np.expm1(lam))
    log_k = np.zeros(20)
    for w in range(WINDOWS):
        errors = rng.binomial(PER_WINDOW, rates[w])
        log_k += lam * errors - PER_WINDOW * psi
        top = log_k.max()
        if top + math.log(np.exp(log_k - top).mean()) >= math.log(2 / 0.05):
            return w
    return None


def share(found: list[int | None], test: Callable[[int], bool]) -> str:
    hits = sum(a is not None and test(a) for a in found)
    return f"{hits}/{len(found)} = {hits / len(found):.1%}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--monitors", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    runs = args.monitors
    shift = [0.10] * CHANGE + [0.16] * (WINDOWS - CHANGE)
    started = time.perf_counter()

    for name, rates in (("no shift (0.10)", [0.10] * WINDOWS),
                        ("worst case: 0.12 = baseline + T", [0.12] * WINDOWS)):
        for horizon in (365, 30):
            found = [monitor(rng, counts(rates), horizon=horizon)[0] for _ in range(runs)]
            print(f"{name}, horizon {horizon}: any alarm {share(found, lambda a: True)}")

    on_time, late, agree = [], [], 0
    for _ in range(runs):
        seed = int(rng.integers(2**32))
        first = monitor(np.random.default_rng(seed), counts(shift))
        second = monitor(np.random.default_rng(seed), counts(shift), delay=1)
        on_time.append(first[0])
        late.append(second[0])
        agree += first[0] == second[0] and second[1] == (None if first[1] is None
                                                         else first[1] + 1)
    delays = Counter(None if a is None else a - CHANGE for a in on_time)
    print(f"0.10 -> 0.16 at window {CHANGE}: alarm within 5 windows "
          f"{share(on_time, lambda a: CHANGE <= a < CHANGE + 5)}; before the change "
          f"{share(on_time, lambda a: a < CHANGE)}; windows after the change: "
          f"{sorted(delays.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))}")
    print(f"  labels one window late: same alarm window, one run later in {agree}/{runs}")
    naive = [since_deployment(rng, shift) for _ in range(runs)]
    naive_delays = [a - CHANGE for a in naive if a is not None and a >= CHANGE]
    print(f"  one sequence since deployment (no forgetting): alarm within 5 windows "
          f"{share(naive, lambda a: CHANGE <= a < CHANGE + 5)}, within 20 "
          f"{share(naive, lambda a: CHANGE <= a < WINDOWS)}; median delay "
          f"{np.median(naive_delays) if naive_delays else 'none'}")

    for metric in ("error_rate", "brier"):
        found = [monitor(rng, records(metric, lambda w: w >= CHANGE), metric=metric)[0]
                 for _ in range(runs)]
        print(f"confidence-only shift, {metric}: any alarm {share(found, lambda a: True)}")
    found = [monitor(rng, records("brier", lambda w: w >= CHANGE, 0.84), metric="brier")[0]
             for _ in range(runs)]
    print(f"Brier 0.09 -> 0.138 at window {CHANGE}: alarm within 5 windows "
          f"{share(found, lambda a: CHANGE <= a < CHANGE + 5)}; before the change "
          f"{share(found, lambda a: a < CHANGE)}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
