"""The harmful-shift alarm: its state, label-arrival order, and its error rates.

Seeded simulations (smaller than `bench/harmful_shift.py`, whose 1,000-monitor figures are
in bench/README.md): monitors of 30 windows with 2,000 labelled records each, a baseline of
10,000 labelled records, T = 0.02, α = 0.05, horizon 365 windows. The guarantee is
P(any false alarm within the horizon) ≤ α; a simulated share of R monitors may exceed α by
the one-sided binomial 99 % tolerance.

- no shift (error rate 0.10 throughout): false alarms ≤ α;
- the worst case the guarantee covers (production risk exactly baseline + T): ≤ α;
- error rate 0.10 → 0.16 from window 10: alarm within 5 windows in ≥ 90 %;
- a shift of confidences alone (error rate the same, Brier lower): no alarm beyond α on
  either metric;
- labels arriving one window late: the same alarm window, one run later;
- a baseline too small for the tolerance (θ ≥ 1) never alarms, and the size named for it
  does.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from decflow.contracts.sections import HarmfulShift
from decflow.metrics.harmful_shift import (
    HarmfulShiftDetector,
    baseline_needed,
    record_losses,
    risk_bounds,
)

ALPHA = 0.05
WINDOWS = 30
PER_WINDOW = 2000
BASELINE = 10_000
SETTINGS = HarmfulShift(tolerance=0.02)


def tolerance(runs: int) -> float:
    return ALPHA + 2.326 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def detector(rng: np.random.Generator, rate: float = 0.10,
             settings: HarmfulShift = SETTINGS) -> HarmfulShiftDetector:
    loss = float(rng.binomial(BASELINE, rate))
    return HarmfulShiftDetector.start(**settings.model_dump(), baseline_n=BASELINE,
                                      baseline_loss=loss)


def first_alarm(rng: np.random.Generator, rates: list[float]) -> int | None:
    """The window index an error-rate monitor alarms at (None: no alarm)."""
    state = detector(rng)
    for window, rate in enumerate(rates):
        state = state.update(f"w{window:02d}", PER_WINDOW, float(rng.binomial(PER_WINDOW, rate)))
        if state.alarm is not None:
            return int(state.alarm.window[1:])
    return None


def test_losses_are_errors_or_top_label_brier() -> None:
    confidence, correct = np.array([0.9, 0.6, 0.7]), np.array([True, False, True])
    assert record_losses("error_rate", confidence, correct).tolist() == [0.0, 1.0, 0.0]
    assert np.allclose(record_losses("brier", confidence, correct), [0.01, 0.36, 0.09])


def test_the_threshold_is_the_baseline_upper_bound_plus_the_tolerance() -> None:
    state = HarmfulShiftDetector.start("error_rate", 0.02, 0.05, 365, 10_000, 1000.0)
    # exact one-sided 97.5 % Clopper–Pearson bound of 1,000 errors in 10,000
    assert state.baseline_upper == pytest.approx(risk_bounds("error_rate", 10_000, 1000, 0.025)[1])
    assert 0.1055 < state.baseline_upper < 0.1065
    assert state.theta == pytest.approx(state.baseline_upper + 0.02)
    assert state.log_threshold == pytest.approx(math.log(2 * 365 / 0.05))
    assert state.false_alarm_bound == pytest.approx(0.05)  # within the horizon
    for window in range(400):
        state = state.update(f"w{window}", 10, 1.0)
    assert state.false_alarm_bound == pytest.approx(0.025 + 400 * 0.025 / 365)


def test_state_round_trips_through_json_and_updates_alike() -> None:
    rng = np.random.default_rng(0)
    state = detector(rng)
    for window in range(12):
        rate = 0.16 if window >= 8 else 0.10
        state = state.update(f"w{window}", PER_WINDOW, float(rng.binomial(PER_WINDOW, rate)))
    stored = json.loads(json.dumps(state.to_dict()))
    again = HarmfulShiftDetector.from_dict(stored)
    assert again == state and again.alarm is not None
    assert again.update("w12", 100, 20.0) == state.update("w12", 100, 20.0)
    assert len(json.dumps(stored)) < 4000


def test_a_damaged_state_is_refused() -> None:
    stored = detector(np.random.default_rng(8)).to_dict()
    with pytest.raises(ValueError, match="not a harmful-shift state"):
        HarmfulShiftDetector.from_dict({**stored, "log_r": [0.0]})
    with pytest.raises(ValueError, match="not a harmful-shift state"):
        HarmfulShiftDetector.from_dict({k: v for k, v in stored.items() if k != "baseline"})


def test_a_threshold_at_one_never_alarms() -> None:
    state = HarmfulShiftDetector.start("error_rate", 0.9, 0.05, 365, 100, 20.0)
    assert state.theta >= 1.0
    assert state.update("w0", 1000, 1000.0).alarm is None


def test_an_empty_update_changes_nothing_and_bad_sums_are_refused() -> None:
    state = detector(np.random.default_rng(1))
    assert state.update("w0", 0, 0.0) is state
    with pytest.raises(ValueError, match="outside"):
        state.update("w0", 10, 11.0)
    with pytest.raises(ValueError, match="baseline"):
        HarmfulShiftDetector.start("error_rate", 0.02, 0.05, 365, 0, 0.0)


def test_late_labels_of_a_started_window_do_not_start_a_new_product() -> None:
    state = detector(np.random.default_rng(2))
    state = state.update("w0", 1000, 100.0).update("w1", 1000, 100.0).update("w0", 1000, 100.0)
    assert state.started == 2 and [s.window for s in state.starts] == ["w0", "w1"]


def test_labels_one_window_late_alarm_at_the_same_window_one_run_later() -> None:
    rng = np.random.default_rng(3)
    errors = [int(rng.binomial(PER_WINDOW, 0.16 if w >= 10 else 0.10)) for w in range(WINDOWS)]
    baseline = float(rng.binomial(BASELINE, 0.10))

    def monitor(delay: int) -> tuple[str, int]:
        """Run r sees the labels of window r − delay; (alarm window, run it fired in)."""
        state = HarmfulShiftDetector.start(**SETTINGS.model_dump(), baseline_n=BASELINE,
                                           baseline_loss=baseline)
        for run in range(WINDOWS + delay):
            window = run - delay
            if window >= 0:
                state = state.update(f"w{window:02d}", PER_WINDOW, float(errors[window]))
            if state.alarm is not None:
                return state.alarm.window, run
        raise AssertionError("no alarm")

    on_time, late = monitor(0), monitor(1)
    assert late[0] == on_time[0] and late[1] == on_time[1] + 1
    assert int(on_time[0][1:]) >= 10


def test_no_shift_false_alarms_stay_within_alpha() -> None:
    rng = np.random.default_rng(4)
    runs = 300
    alarms = sum(first_alarm(rng, [0.10] * WINDOWS) is not None for _ in range(runs))
    assert alarms / runs <= tolerance(runs)


def test_at_the_boundary_of_the_guarantee_false_alarms_stay_within_alpha() -> None:
    # production exactly at the baseline's true risk + T: no harmful shift, the worst case
    rng = np.random.default_rng(5)
    runs = 300
    alarms = sum(first_alarm(rng, [0.12] * WINDOWS) is not None for _ in range(runs))
    assert alarms / runs <= tolerance(runs)


def test_error_rate_from_ten_to_sixteen_percent_alarms_within_five_windows() -> None:
    rng = np.random.default_rng(6)
    runs = 150
    found = [first_alarm(rng, [0.10] * 10 + [0.16] * 20) for _ in range(runs)]
    within = sum(a is not None and 10 <= a < 15 for a in found)
    assert within / runs >= 0.9, found


@pytest.mark.parametrize("metric", ["error_rate", "brier"])
def test_a_shift_of_confidences_alone_does_not_alarm(metric: str) -> None:
    # before: confidence 0.9, 90 % right; after: half at 0.99 (99 % right), half at 0.81
    # (81 % right): the same error rate, a lower Brier risk
    rng = np.random.default_rng(7)
    settings = HarmfulShift(metric=metric, tolerance=0.02)  # type: ignore[arg-type]
    runs, n = 100, 1000

    def window(shifted: bool) -> tuple[int, float]:
        confidence = (np.where(rng.random(n) < 0.5, 0.99, 0.81) if shifted
                      else np.full(n, 0.9))
        correct = rng.random(n) < confidence
        return n, float(record_losses(settings.metric, confidence, correct).sum())

    alarms = 0
    for _ in range(runs):
        base_n, base_loss = 0, 0.0
        for _ in range(10):
            size, loss = window(False)
            base_n, base_loss = base_n + size, base_loss + loss
        state = HarmfulShiftDetector.start(**settings.model_dump(), baseline_n=base_n,
                                           baseline_loss=base_loss)
        for w in range(WINDOWS):
            state = state.update(f"w{w}", *window(w >= 5))
        alarms += state.alarm is not None
    assert alarms / runs <= tolerance(runs)


@pytest.mark.parametrize(("metric", "n", "loss", "tolerance"), [
    ("error_rate", 1, 0.0, 0.05), ("error_rate", 2, 1.0, 0.02), ("error_rate", 3, 2.0, 0.1),
    ("error_rate", 40, 37.0, 0.02), ("brier", 3, 2.5, 0.02), ("brier", 1, 0.0, 0.3)])
def test_a_baseline_too_small_never_alarms_and_the_size_named_would(
        metric: str, n: int, loss: float, tolerance: float) -> None:
    """θ ≥ 1: every record wrong does not alarm. The size `baseline_needed` names, at the
    baseline's mean loss, has θ < 1 and one record fewer has not; with no loss it is the
    fewest."""
    def start(size: int, total: float) -> HarmfulShiftDetector:
        return HarmfulShiftDetector.start(metric, tolerance, ALPHA, 365, size, total)  # type: ignore[arg-type]

    small = start(n, loss)
    assert small.theta >= 1.0 and not small.can_alarm
    worst = small
    for window in range(50):
        worst = worst.update(f"w{window}", 1000, 1000.0)
    assert worst.alarm is None
    needed = baseline_needed(metric, tolerance, ALPHA, n, loss)  # type: ignore[arg-type]
    assert needed is not None and needed > n and needed == small.needed
    risk = loss / n
    assert start(needed, risk * needed).can_alarm
    assert not start(needed - 1, risk * (needed - 1)).can_alarm
    if loss == 0:
        assert not any(start(m, 0.0).can_alarm for m in range(1, needed))
    # it can: enough wrong decisions raise it (θ(needed) may lie just below 1)
    assert start(needed, risk * needed).update("w", 10**9, 1e9).alarm is not None


def test_no_baseline_size_helps_when_its_risk_plus_the_tolerance_reaches_1() -> None:
    assert baseline_needed("error_rate", 0.02, ALPHA, 50, 49.0) is None
