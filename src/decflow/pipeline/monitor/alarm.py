"""The monitor's harmful-shift alarm (`monitor.harmful_shift`): the detector of
`metrics.harmful_shift`, started against the baseline's risk and fed, run after run, each
data window's newly labelled records (windows in data order within a run; labels in the
order they arrived across runs). Its state is part of the monitor's. A detector that starts
(the first run with a baseline and the alarm set) or starts again (a different baseline or
different settings; the report says so) is first fed every labelled record the monitor
holds, window by window in data order: the alarm is over all labelled records so far,
whenever the baseline came.

The baseline's risk: for `error_rate` its labelled records' errors (from its stored
metrics); for `brier` (the top label's (confidence − correct)²) the records themselves,
read once when the baseline is read (a check report or run that does not inline its
records cannot give it).

A configured alarm that cannot alarm is *not established* (WARN), never a pass: without a
baseline, against a baseline with no labelled record, or with a threshold θ ≥ 1 (a baseline
too small for the tolerance; the check names the size that would do).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from decflow.contracts.sections import HarmfulShift
from decflow.data.records.reader import RecordReader, RecordSpec
from decflow.errors import DecflowError
from decflow.gates.checks import Check
from decflow.gates.headline import bounds, number
from decflow.metrics.evidence import Evidence
from decflow.metrics.harmful_shift import (
    HarmfulShiftDetector,
    RiskMetric,
    record_losses,
    risk_bounds,
)
from decflow.pipeline.monitor.baselines import MonitorBaseline
from decflow.pipeline.monitor.stages import MonitorContext
from decflow.pipeline.monitor.state import MonitorState
from decflow.pipeline.production.baseline import names_records

GATE = "harmful_shift"
SHOWN_LEVEL = 0.05  # the one-sided level of the bounds shown beside the risk
METRIC_WORDS = {"error_rate": "error rate", "brier": "Brier"}
METHOD = "harmful-shift e-detector (Shiryaev-Roberts; metrics/harmful_shift.py)"
NO_BASELINE = ("no baseline (the alarm needs --baseline: records, a check report, a check run "
               "or accepted)")


def _settings(shift: HarmfulShift) -> dict[str, Any]:
    return {"metric": shift.metric, "tolerance": shift.tolerance, "alpha": shift.alpha,
            "horizon": shift.horizon}


def baseline_risk(context: MonitorContext, baseline: MonitorBaseline,
                  metric: RiskMetric) -> tuple[int, float]:
    """(labelled records, loss sum) of the baseline for `metric`."""
    if metric == "error_rate":
        return baseline.n_labelled, float(baseline.errors)
    source = str(baseline.baseline.block.get("path"))
    if baseline.baseline.block.get("source") != "dataset" or not names_records(source):
        raise DecflowError(
            "monitor.harmful_shift.metric brier needs the baseline's records (each record's "
            f"confidence and correctness), and the baseline {source} is a stored report; "
            "give --baseline records, or use metric: error_rate")
    spec = RecordSpec.from_contract(context.loaded.contract)
    n, loss = 0, 0.0
    for batch in RecordReader(source, spec, texts=False).batches():
        known = batch.table.filter(pl.col("outcome_correct").is_not_null())
        n += known.height
        loss += float(record_losses("brier", known["confidence"].to_numpy(),
                                    known["outcome_correct"].to_numpy()).sum())
    return n, loss


@dataclass(frozen=True)
class Advanced:
    """The detector after this run (None: the alarm is off, or cannot start: `settings`
    set), why it started again, the labelled records it replayed when it (re)started in
    this run, and why it cannot start (`unstarted`)."""

    detector: HarmfulShiftDetector | None
    restarted: str | None = None
    replayed: int | None = None
    settings: HarmfulShift | None = None
    unstarted: str | None = None


# every labelled record the monitor holds, as `window_losses` of a metric
History = Callable[[RiskMetric], pl.DataFrame]


def window_losses(metric: RiskMetric, labelled: pl.DataFrame) -> pl.DataFrame:
    """Labelled predictions (`confidence`, `correct`) as each data window's labelled records
    and loss sum (`window`, `n`, `loss`), in window order."""
    losses = record_losses(metric, labelled["confidence"].to_numpy(),
                           labelled["correct"].to_numpy() == 1)
    return (labelled.select("window").with_columns(loss=pl.Series(losses, dtype=pl.Float64))
            .group_by("window").agg(n=pl.len().cast(pl.Int64), loss=pl.col("loss").sum())
            .sort("window"))


def advance(context: MonitorContext, state: MonitorState, baseline: MonitorBaseline | None,
            newly: pl.DataFrame, history: History) -> Advanced:
    """Feed the detector this run's newly labelled records, window by window in data order
    (`newly`: predictions with their correctness); a detector (re)started is fed all of
    `history` instead (which holds `newly`)."""
    monitor = context.loaded.contract.monitor
    settings = None if monitor is None else monitor.harmful_shift
    if settings is None:
        state.detector = None
        return Advanced(None)
    if baseline is None:
        state.detector = None
        return Advanced(None, settings=settings, unstarted=NO_BASELINE)
    stored, restarted, replayed = state.detector, None, None
    wanted = {"baseline": baseline.identity, "settings": _settings(settings)}
    if stored is not None and {k: stored[k] for k in wanted} == wanted:
        detector = HarmfulShiftDetector.from_dict(stored["state"])
        feed = window_losses(settings.metric, newly)
    else:
        if stored is not None:
            restarted = ("the baseline changed" if stored["baseline"] != baseline.identity
                         else "monitor.harmful_shift changed")
        n, loss = _risk(context, state, baseline, settings.metric)
        if n == 0:
            state.detector = None
            return Advanced(None, settings=settings, unstarted=(
                f"the baseline {baseline.baseline.block.get('path')} has no labelled record "
                "(the alarm needs a baseline with outcomes)"))
        detector = HarmfulShiftDetector.start(settings.metric, settings.tolerance,
                                              settings.alpha, settings.horizon, n, loss)
        feed = history(settings.metric)
        replayed = int(feed["n"].sum())
    for window, n_window, loss_window in feed.iter_rows():
        detector = detector.update(window, n_window, loss_window)
    state.detector = {**wanted, "state": detector.to_dict()}
    return Advanced(detector, restarted, replayed)


def _risk(context: MonitorContext, state: MonitorState, baseline: MonitorBaseline,
          metric: RiskMetric) -> tuple[int, float]:
    """The baseline's risk, kept beside the baseline in the state once computed."""
    assert state.baseline is not None
    kept = state.baseline.setdefault("risk", {})
    if metric not in kept:
        n, loss = baseline_risk(context, baseline, metric)
        kept[metric] = {"n": n, "loss": loss}
    return int(kept[metric]["n"]), float(kept[metric]["loss"])


def window_risk(metric: RiskMetric, labelled: pl.DataFrame) -> dict[str, Any]:
    """A window's labelled risk with its one-sided bounds (the chart's band)."""
    n = labelled.height
    if n == 0:
        return {"metric": metric, "n": 0, "loss": 0.0, "value": None, "low": None,
                "high": None}
    loss = float(record_losses(metric, labelled["confidence"].to_numpy(),
                               labelled["correct"].to_numpy() == 1).sum())
    low, high = risk_bounds(metric, n, loss, SHOWN_LEVEL)
    return {"metric": metric, "n": n, "loss": loss, "value": loss / n if n else None,
            "low": low, "high": high}


def cannot_alarm(advanced: Advanced) -> str | None:
    """Why the configured alarm can never be raised as things stand (None: it can, or it is
    off): it could not start, or its threshold θ ≥ 1 is beyond any risk."""
    detector = advanced.detector
    if detector is None:
        return advanced.unstarted
    if detector.can_alarm:
        return None
    words = METRIC_WORDS[detector.metric]
    needed = detector.needed
    base = number(detector.baseline_loss / detector.baseline_n)
    need = (f"a baseline of {needed} labelled records at its {words} {base} would do"
            if needed is not None else
            f"no baseline at its {words} {base} would: lower the tolerance")
    records = "record" if detector.baseline_n == 1 else "records"
    return (f"threshold {number(detector.theta)} >= 1 can never be exceeded (upper bound "
            f"{number(detector.baseline_upper)} of the baseline's {detector.baseline_n} "
            f"labelled {records} + tolerance {number(detector.tolerance)}); {need}")


def shift_check(advanced: Advanced) -> Check | None:
    """The alarm as one check of the monitor (None: off): fail once raised (the risk since
    the window it names), not established when it cannot alarm (`cannot_alarm`) or before
    any labelled record, else pass (no alarm)."""
    detector, why = advanced.detector, cannot_alarm(advanced)
    if detector is None:
        settings = advanced.settings
        if settings is None:
            return None
        # no baseline bounds the risk: the threshold is the loss's own bound 1, + T
        return Check(GATE, "requirement", settings.metric, "<=", 1.0 + settings.tolerance,
                     None, "not_established", f"harmful shift not established: {why}")
    words = METRIC_WORDS[detector.metric]
    alarm = detector.alarm
    if alarm is not None:
        evidence = Evidence(METHOD, alarm.n, "fails", alarm.risk, alarm.low, alarm.high)
        message = (f"{words} {number(alarm.risk)} {bounds(alarm.low, alarm.high)} > baseline "
                   f"{number(alarm.baseline_risk)} + {number(alarm.tolerance)}")
        return Check(GATE, "requirement", detector.metric, "<=", detector.theta, alarm.risk,
                     "fail", message, evidence)
    risk = None if detector.n == 0 else detector.loss / detector.n
    if why is not None:
        return Check(GATE, "requirement", detector.metric, "<=", detector.theta, risk,
                     "not_established", f"harmful shift not established: {why}")
    if risk is None:
        return Check(GATE, "requirement", detector.metric, "<=", detector.theta, None,
                     "not_established", f"{words}: no labelled record yet")
    low, high = risk_bounds(detector.metric, detector.n, detector.loss, SHOWN_LEVEL)
    base = detector.baseline_loss / detector.baseline_n
    return Check(GATE, "requirement", detector.metric, "<=", detector.theta, risk, "pass",
                 f"{words} {number(risk)} {bounds(low, high)} over {detector.n} labelled "
                 f"records; no alarm (baseline {number(base)} + {number(detector.tolerance)})",
                 Evidence(METHOD, detector.n, "holds", risk, low, high))


def summary(advanced: Advanced) -> dict[str, Any] | None:
    """The report's `harmful_shift` block (only the settings and `cannot_alarm` when the
    detector could not start)."""
    detector, why = advanced.detector, cannot_alarm(advanced)
    if detector is None:
        settings = advanced.settings
        return None if settings is None else {**_settings(settings), "cannot_alarm": why}
    alarm = detector.alarm
    return {
        "metric": detector.metric, "tolerance": detector.tolerance, "alpha": detector.alpha,
        "horizon": detector.horizon,
        "baseline": {"n": detector.baseline_n,
                     "risk": detector.baseline_loss / detector.baseline_n,
                     "upper": detector.baseline_upper},
        "threshold": detector.theta, "labelled": detector.n,
        # log R: -inf (written null) before any labelled record
        "log_evidence": None if math.isinf(detector.log_evidence) else detector.log_evidence,
        "log_threshold": detector.log_threshold,
        "alarm": None if alarm is None else vars(alarm), "restarted": advanced.restarted,
        "replayed": advanced.replayed, "cannot_alarm": why,
        "guarantee": f"P(any false alarm within {detector.horizon} windows) <= "
                     f"{number(detector.alpha)}",
    }
