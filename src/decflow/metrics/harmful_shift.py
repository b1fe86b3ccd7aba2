"""The harmful-shift alarm: has the production risk of labelled records risen above the
baseline's by more than a tolerance, since some window? (after Podkopaev & Ramdas 2021)

Risk is the mean of a per-record loss in [0, 1] (`record_losses`): `error_rate` 1 − correct,
or `brier` (confidence − correct)² of the top label. A shift of confidences that leaves the
risk where it was changes nothing here.

**Threshold.** θ = U + T: U is the baseline risk's one-sided upper bound at α/2 (exact
Clopper–Pearson for the error rate, the Chernoff bound for Brier), T the tolerance.

**Evidence that forgets the stable past** (an e-detector in the sense of Shin, Ramdas &
Rinaldo 2023, of Shiryaev–Roberts type). For a loss x in [0, 1] with mean ≤ θ and λ ≥ 0,
E e^{λx} ≤ 1 − θ + θe^λ (x ≤ 1 − x + x·e^λ by convexity), so each record's factor
e^{λx − ψ(λ)}, ψ(λ) = log(1 − θ + θe^λ), has expectation ≤ 1, and for a 0/1 loss it is the
likelihood ratio of Bernoulli(q) against Bernoulli(θ), q = θe^λ / (1 − θ + θe^λ). A window's
labelled records multiply in as e^{λS − nψ(λ)} (n records, loss sum S): the state needs only
sums. The detector starts a new product at each data window's first labelled records and
adds the products of every start (Shiryaev–Roberts), for each of `GRID` alternatives
q_j = θ + (1 − θ)·2^{−j/2} (j = 1 … 20), averaged with equal weights:

    R_j ← (R_j + 1)·e^{λ_j S − nψ(λ_j)}   at a window's first labels,
    R_j ← R_j·e^{λ_j S − nψ(λ_j)}          for later labels of a started window,
    R = mean_j R_j;  ALARM when R ≥ 2H/α.

A start long ago weighs nothing once its product has shrunk, so a stable past does not
dilute a change (a sequence over everything since deployment would).

**Guarantee.** If every labelled record's expected loss, given what came before it in
processing order, is at most the baseline's risk + T (no harmful shift), then
P(any alarm before the (H + 1)-th window's labels) ≤ α. Proof: with N starts so far,
R + (H − N) is a nonnegative supermartingale while N ≤ H (a start adds at most 1 to E[R],
a continuation nothing), starting at H, so by Ville's inequality it reaches 2H/α with
probability ≤ α/2; the baseline bound fails with probability ≤ α/2. Beyond H windows the
bound grows linearly: P(a false alarm within N windows) ≤ α/2 + N·α/(2H). Processing order
is the labels' arrival order (windows in data order within one update batch); it must not
depend on the losses themselves (a label that arrives late because it is an error would
break this, as it would any test).

**What the alarm names.** `window`: the data window whose labelled records took R over the
threshold; `since`: the start (a data window) whose product is largest then, the estimated
change; the risk since then with one-sided 95 % bounds (descriptive: the start was chosen by
the data). A threshold θ ≥ 1 cannot be exceeded: that detector never alarms (`can_alarm`);
`baseline_needed` says how many labelled baseline records would bring θ below 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from decflow.metrics.binomial import clopper_pearson_high, clopper_pearson_low
from decflow.metrics.rate_bounds import kl_bound

RiskMetric = Literal["error_rate", "brier"]
GRID = 20
MAX_STARTS = 1000  # starts kept to name `since`; R itself is exact whatever is dropped
STATE_VERSION = 1
_LEVEL = 0.05  # the one-sided level of the bounds shown beside an alarm


def record_losses(metric: RiskMetric, confidence: npt.ArrayLike,
                  correct: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Each labelled record's loss in [0, 1]: 1 − correct (`error_rate`) or
    (confidence − correct)² of the top label (`brier`)."""
    right = np.asarray(correct, dtype=np.float64)
    if metric == "error_rate":
        return 1.0 - right
    if metric == "brier":
        out: npt.NDArray[np.float64] = (np.asarray(confidence, dtype=np.float64) - right) ** 2
        return out
    raise ValueError(f"unknown risk metric {metric!r} (error_rate or brier)")


@lru_cache(maxsize=4096)  # pure; a monitor asks for the same baseline's bound every run
def risk_bounds(metric: RiskMetric, n: int, loss: float, alpha: float) -> tuple[float, float]:
    """One-sided (1 − α) lower and upper bounds on a risk from n losses summing to `loss`:
    exact Clopper–Pearson for the error rate (a count), Chernoff for Brier."""
    if n <= 0:
        return 0.0, 1.0
    if metric == "error_rate":
        count = round(loss)
        return clopper_pearson_low(count, n, alpha), clopper_pearson_high(count, n, alpha)
    mean = min(max(loss / n, 0.0), 1.0)
    return kl_bound(mean, n, alpha, upper=False), kl_bound(mean, n, alpha, upper=True)


def _baseline_upper(metric: RiskMetric, alpha: float, n: int, loss: float) -> float:
    """U: the one-sided upper bound at α/2 of a baseline of n labelled records whose losses
    sum to `loss`."""
    return risk_bounds(metric, n, loss, alpha / 2.0)[1]


def baseline_needed(metric: RiskMetric, tolerance: float, alpha: float, n: int,
                    loss: float) -> int | None:
    """How many labelled baseline records at the same mean loss as these `n` (θ ≥ 1) would
    give a θ below 1, so that the detector can alarm: None when no size can (mean loss + T
    ≥ 1, the limit of θ). Searched by doubling n, then bisection: the size returned has
    θ < 1 and one record fewer has not (the fewest when the loss is 0: θ then falls with
    every record; a rounded error count can make a few sizes near it alternate)."""
    risk = loss / n
    if risk + tolerance >= 1.0:
        return None
    below, above = n, 2 * n  # θ(below) ≥ 1; `above` doubles until θ(above) < 1
    while _baseline_upper(metric, alpha, above, risk * above) + tolerance >= 1.0:
        below, above = above, 2 * above
    while above - below > 1:
        middle = (below + above) // 2
        if _baseline_upper(metric, alpha, middle, risk * middle) + tolerance >= 1.0:
            below = middle
        else:
            above = middle
    return above


@lru_cache(maxsize=64)
def _grid(theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(λ_j, ψ(λ_j)) of the alternatives q_j = θ + (1 − θ)·2^{−j/2}."""
    q = theta + (1.0 - theta) * 2.0 ** (-np.arange(1, GRID + 1) / 2.0)
    lam = np.log(q * (1.0 - theta)) - np.log(theta * (1.0 - q))
    return lam, np.log1p(theta * np.expm1(lam))


def _log_mean(logs: np.ndarray) -> float:
    top = float(np.max(logs))
    if top == -math.inf:
        return -math.inf
    return top + math.log(float(np.exp(logs - top).sum()) / logs.size)


@dataclass(frozen=True)
class Start:
    """A data window's first labelled records began a product here: the totals before it."""

    window: str
    n_before: int
    loss_before: float


@dataclass(frozen=True)
class Alarm:
    """Where the evidence crossed and what it shows (see the module docstring)."""

    window: str
    since: str
    step: int
    n: int
    risk: float
    low: float
    high: float
    baseline_risk: float
    baseline_upper: float
    tolerance: float
    log_evidence: float
    log_threshold: float


@dataclass(frozen=True)
class HarmfulShiftDetector:
    """The alarm's whole state: small, JSON-serialisable (`to_dict`/`from_dict`), updated
    with each data window's newly labelled records in arrival order (`update`)."""

    metric: RiskMetric
    tolerance: float
    alpha: float
    horizon: int
    baseline_n: int
    baseline_loss: float
    baseline_upper: float
    log_r: tuple[float, ...]
    n: int = 0
    loss: float = 0.0
    steps: int = 0
    started: int = 0
    starts: tuple[Start, ...] = ()
    alarm: Alarm | None = None

    @classmethod
    def start(cls, metric: RiskMetric, tolerance: float, alpha: float, horizon: int,
              baseline_n: int, baseline_loss: float) -> HarmfulShiftDetector:
        """A detector against a baseline of `baseline_n` labelled records whose losses sum
        to `baseline_loss`."""
        if baseline_n <= 0:
            raise ValueError("the harmful-shift alarm needs a baseline with labelled records")
        if not 0.0 < alpha < 1.0 or not 0.0 <= tolerance < 1.0 or horizon < 1:
            raise ValueError("harmful_shift needs 0 < alpha < 1, 0 <= tolerance < 1, horizon >= 1")
        if not 0.0 <= baseline_loss <= baseline_n:
            raise ValueError(f"a baseline loss sum of {baseline_loss} over {baseline_n} records "
                             "is outside [0, n]")
        upper = _baseline_upper(metric, alpha, baseline_n, baseline_loss)
        return cls(metric, tolerance, alpha, horizon, baseline_n, baseline_loss, upper,
                   (-math.inf,) * GRID)

    @property
    def theta(self) -> float:
        """The risk the production is tested against: the baseline's upper bound + T."""
        return self.baseline_upper + self.tolerance

    @property
    def can_alarm(self) -> bool:
        """Whether the evidence can ever reach the threshold: θ < 1 (a loss is at most 1)."""
        return self.theta < 1.0

    @property
    def needed(self) -> int | None:
        """Labelled baseline records that would let a detector that cannot alarm do so
        (`baseline_needed`)."""
        return baseline_needed(self.metric, self.tolerance, self.alpha, self.baseline_n,
                               self.baseline_loss)

    @property
    def log_threshold(self) -> float:
        return math.log(2.0 * self.horizon / self.alpha)

    @property
    def false_alarm_bound(self) -> float:
        """The chance of a false alarm so far is at most this: α/2 + N·α/(2H) for N windows
        started (α while N ≤ H)."""
        return self.alpha / 2.0 * (1.0 + max(self.started, self.horizon) / self.horizon)

    @property
    def log_evidence(self) -> float:
        """log R (−inf before any labelled record)."""
        return _log_mean(np.asarray(self.log_r))

    def update(self, window: str, n: int, loss: float) -> HarmfulShiftDetector:
        """The state after `n` newly labelled records of data `window` with losses summing
        to `loss`; a window not seen before begins a new product. The first crossing of the
        threshold sets `alarm` (it stays: later updates keep it and go on counting)."""
        if n < 0 or not 0.0 <= loss <= n or not math.isfinite(loss):
            raise ValueError(f"{window}: a loss sum of {loss} over {n} records is outside [0, n]")
        if n == 0:
            return self
        new_start = all(s.window != window for s in self.starts)
        starts = self.starts
        if new_start:
            starts = (*starts, Start(window, self.n, self.loss))[-MAX_STARTS:]
        log_r = np.asarray(self.log_r)
        if self.can_alarm:
            lam, psi = _grid(self.theta)
            if new_start:
                log_r = np.logaddexp(log_r, 0.0)
            log_r = log_r + lam * loss - n * psi
        state = replace(self, log_r=tuple(float(v) for v in log_r), n=self.n + n,
                        loss=self.loss + loss, steps=self.steps + 1,
                        started=self.started + new_start, starts=starts)
        if state.alarm is None and state.log_evidence >= state.log_threshold:
            state = replace(state, alarm=state._alarm(window))
        return state

    def _alarm(self, window: str) -> Alarm:
        lam, psi = _grid(self.theta)
        weights = [_log_mean(lam * (self.loss - s.loss_before) - (self.n - s.n_before) * psi)
                   for s in self.starts]
        since = self.starts[int(np.argmax(weights))]
        n, loss = self.n - since.n_before, self.loss - since.loss_before
        low, high = risk_bounds(self.metric, n, loss, _LEVEL)
        return Alarm(window=window, since=since.window, step=self.steps, n=n, risk=loss / n,
                     low=low, high=high, baseline_risk=self.baseline_loss / self.baseline_n,
                     baseline_upper=self.baseline_upper, tolerance=self.tolerance,
                     log_evidence=self.log_evidence, log_threshold=self.log_threshold)

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON (floats round-trip exactly; −inf written as null)."""
        return {
            "version": STATE_VERSION, "metric": self.metric, "tolerance": self.tolerance,
            "alpha": self.alpha, "horizon": self.horizon,
            "baseline": {"n": self.baseline_n, "loss": self.baseline_loss,
                         "upper": self.baseline_upper},
            "log_r": [None if v == -math.inf else v for v in self.log_r],
            "n": self.n, "loss": self.loss, "steps": self.steps, "started": self.started,
            "starts": [[s.window, s.n_before, s.loss_before] for s in self.starts],
            "alarm": None if self.alarm is None else vars(self.alarm),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HarmfulShiftDetector:
        """A state stored by `to_dict` (a `ValueError` for another version or shape)."""
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"harmful-shift state version {data.get('version')!r}, "
                             f"expected {STATE_VERSION}")
        try:
            baseline = data["baseline"]
            log_r = tuple(-math.inf if v is None else float(v) for v in data["log_r"])
            alarm = data.get("alarm")
            state = cls(
                metric=data["metric"], tolerance=float(data["tolerance"]),
                alpha=float(data["alpha"]), horizon=int(data["horizon"]),
                baseline_n=int(baseline["n"]), baseline_loss=float(baseline["loss"]),
                baseline_upper=float(baseline["upper"]), log_r=log_r, n=int(data["n"]),
                loss=float(data["loss"]), steps=int(data["steps"]),
                started=int(data["started"]),
                starts=tuple(Start(str(w), int(n), float(loss))
                             for w, n, loss in data["starts"]),
                alarm=None if alarm is None else Alarm(**alarm))
        except (LookupError, TypeError, ValueError) as exc:
            raise ValueError(f"not a harmful-shift state: {exc!r}") from None
        if len(state.log_r) != GRID or state.metric not in ("error_rate", "brier"):
            raise ValueError(f"not a harmful-shift state: {GRID} products of error_rate or "
                             "brier expected")
        return state
