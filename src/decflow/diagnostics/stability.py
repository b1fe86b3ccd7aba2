"""The rerun stability meter: is the decision repeatable enough to test against?

Each case is decided k times unchanged. Within a case the reruns are compared in
consecutive, disjoint pairs (1,2), (3,4), … — overlapping pairs would count the same call
twice and overstate the evidence — so an odd last rerun stays out of the interval (it still
counts toward ``cases_with_flip``). The verdict comes from the Wilson bounds on
flips / pairs against ε. A case whose series contains an error is *incomplete*: its pairs
are left out entirely, because two failed calls "agreeing" would certify the failure.

Input table (one row per rerun; the pipeline's results joined to their rerun index):

    case_id        str
    repeat         int        order of the rerun within its case (0-based; only order matters)
    selected       str | int  the selected label (or its index); null on error
    probabilities  list[f64]  contract order; optional column, null on error
    error_kind     str        optional column; non-null marks an errored rerun
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from decflow.diagnostics.arrays import label_codes, probability_matrix
from decflow.diagnostics.blindness import BlindnessResult
from decflow.gates.checks import Check, Level, make_check
from decflow.metrics.compare import compare
from decflow.metrics.stats import Z95, Verdict, classify, pairs_needed, wilson


@dataclass(frozen=True)
class StabilityResult:
    repeats: int  # the most reruns any case had
    n_cases: int  # complete cases (every rerun decided)
    n_incomplete: int  # cases left out because a rerun errored
    pairs: int
    flips: int
    flip_rate: float | None
    ci_low: float
    ci_high: float
    epsilon: float
    verdict: Verdict
    mean_tv: float | None  # between the two reruns of a pair; None without probabilities
    tv_p95: float | None  # 95th percentile of that TV: the rerun noise floor for persona pairs
    pairs_needed: int | None  # pairs that would decide at the observed rate; None if none can
    cases_with_flip: int
    advice: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _case_layout(case_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows sorted by case: case code per row, rows per case, position within the case."""
    boundary = np.empty(case_ids.size, dtype=bool)
    boundary[:1] = True
    boundary[1:] = case_ids[1:] != case_ids[:-1]
    codes = np.cumsum(boundary) - 1
    starts = np.flatnonzero(boundary)
    counts = np.diff(np.append(starts, case_ids.size))
    positions = np.arange(case_ids.size) - starts[codes]
    return codes, counts, positions


def _probabilities(table: pl.DataFrame) -> np.ndarray | None:
    if "probabilities" not in table.columns:
        return None
    column = table["probabilities"]
    if column.null_count() == column.len():
        return None
    width = int(column.drop_nulls().list.len().max())  # type: ignore[arg-type]
    return probability_matrix(column, width)[0]


def measure_stability(
    reruns: pl.DataFrame, *, epsilon: float = 0.05, z: float = Z95
) -> StabilityResult:
    """Pool disjoint rerun pairs over all complete cases and classify against ε."""
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    table = reruns.sort(["case_id", "repeat"])
    if table.select(pl.struct("case_id", "repeat").is_duplicated().any()).item():
        raise ValueError("rerun table has a (case_id, repeat) pair more than once")
    n_rows = table.height
    case_ids = table["case_id"].cast(pl.String).to_numpy()
    errored = table["selected"].is_null().to_numpy()
    if "error_kind" in table.columns:
        errored |= table["error_kind"].is_not_null().to_numpy()
    selected = label_codes(table["selected"])
    probabilities = _probabilities(table)

    if n_rows:
        codes, counts, positions = _case_layout(case_ids)
    else:
        codes = counts = positions = np.zeros(0, dtype=np.int64)
    incomplete = np.bincount(codes[errored], minlength=counts.size) > 0
    complete_row = ~incomplete[codes]

    first = (positions % 2 == 0) & (positions + 1 < counts[codes]) & complete_row
    left = np.flatnonzero(first)
    right = left + 1
    flipped = selected[left] != selected[right]
    n_pairs = int(left.size)
    n_flips = int(flipped.sum())

    mean_tv: float | None = None
    tv_p95: float | None = None
    if probabilities is not None and n_pairs:
        tv = compare(
            probabilities[left], probabilities[right], relation="invariant", decision_type="choice"
        ).tv
        mean_tv = math.fsum(tv.tolist()) / n_pairs
        tv_p95 = float(np.percentile(tv, 95))

    # Any disagreement among all k reruns of a case, the odd last one included.
    n_complete = int((~incomplete).sum())
    if n_rows:
        starts = np.flatnonzero(positions == 0)
        low = np.minimum.reduceat(selected, starts)
        high = np.maximum.reduceat(selected, starts)
        cases_with_flip = int(((low != high) & ~incomplete).sum())
    else:
        cases_with_flip = 0

    lo, hi = wilson(n_flips, n_pairs, z)
    verdict = classify(lo, hi, epsilon)
    rate = n_flips / n_pairs if n_pairs else None
    needed = _pairs_to_decide(epsilon, rate, z)
    repeats = int(counts.max()) if counts.size else 0
    partial = StabilityResult(
        repeats=repeats,
        n_cases=n_complete,
        n_incomplete=int(incomplete.sum()),
        pairs=n_pairs,
        flips=n_flips,
        flip_rate=rate,
        ci_low=lo,
        ci_high=hi,
        epsilon=epsilon,
        verdict=verdict,
        mean_tv=mean_tv,
        tv_p95=tv_p95,
        pairs_needed=needed,
        cases_with_flip=cases_with_flip,
        advice="",
    )
    return replace(partial, advice=stability_advice(partial))


def _pairs_to_decide(epsilon: float, rate: float | None, z: float) -> int | None:
    """Total pairs at which the interval would clear ε if the observed rate held.

    Below ε this is the certification size n*. Above ε the same score-test boundary applies
    with the roles of flips and agreements exchanged, so n* at (1 − ε, 1 − p̂) gives the size
    at which the lower bound clears ε. At p̂ = ε no sample size separates the two.
    """
    p_hat = 0.0 if rate is None else rate
    if p_hat < epsilon:
        return pairs_needed(epsilon, p_hat, z)
    if p_hat > epsilon:
        return pairs_needed(round(1.0 - epsilon, 12), round(1.0 - p_hat, 12), z)
    return None


def _interval(result: StabilityResult) -> str:
    return f"[{result.ci_low:.3f}, {result.ci_high:.3f}]"


def stability_advice(result: StabilityResult) -> str:
    """What the verdict means for choosing an oracle, with the numbers that support it."""
    counts = f"{result.flips} of {result.pairs} rerun pairs disagreed"
    eps = f"{result.epsilon:g}"
    if result.verdict == "deterministic":
        return (
            f"deterministic: {counts} (95% CI {_interval(result)}, below ε = {eps}). "
            "Prefer frozen-baseline diffing: accept a run with `decflow runs accept RUN` and "
            "compare later runs against it with `decflow diff`."
        )
    if result.verdict == "stochastic":
        noise = "" if result.mean_tv is None else f", mean TV {result.mean_tv:.3f}"
        return (
            f"stochastic: {counts} (95% CI {_interval(result)}, above ε = {eps}{noise}). "
            "Compare property violation and flip rates with this measured rerun noise, "
            "not with zero."
        )
    return f"undecided: {counts} (95% CI {_interval(result)} contains ε = {eps}). " + (
        _sizing_hint(result)
    )


def _sizing_hint(result: StabilityResult) -> str:
    needed = result.pairs_needed
    if needed is None:
        return (
            "The observed flip rate sits at ε, so more pairs will not separate it; "
            "choose the tolerance the decision really needs."
        )
    rate = 0.0 if result.flip_rate is None else result.flip_rate
    head = f"About {needed} pairs would decide it if the flip rate stays at {rate:.3g}"
    more = max(needed - result.pairs, 1)
    if result.n_cases == 0:
        return f"{head}; no complete case was measured yet."
    repeats = max(2, 2 * math.ceil(needed / result.n_cases))
    per_case = max(result.repeats // 2, 1)
    more_cases = max(math.ceil(needed / per_case) - result.n_cases, 1)
    return (
        f"{head} ({more} more): run {repeats} repeats on these {result.n_cases} cases, "
        f"or add {more_cases} cases at {max(result.repeats, 2)} repeats."
    )


def stability_check(result: StabilityResult, level: Level) -> Check:
    """`stability.verdict`: fails on a stochastic verdict (CI lower bound above ε), and as
    *not exercised* when no complete rerun pair was measured: no evidence is never a pass."""
    if result.pairs == 0:
        reason = (
            f"not exercised: no complete rerun pair ({result.n_incomplete} case(s) left out "
            "because a rerun errored)" if result.n_incomplete
            else "not exercised: no case had two reruns to compare"
        )
        return make_check(
            "stability.verdict", level, "stability.ci_low", "<=", result.epsilon, None,
            reason_if_null=reason,
        )
    rate = "n/a" if result.flip_rate is None else f"{result.flip_rate:.4g}"
    notes = [
        f"{result.verdict}: flip rate {rate} ({result.flips}/{result.pairs} pairs), "
        f"95% CI {_interval(result)}"
    ]
    if result.verdict == "undecided":
        notes.append(_sizing_hint(result))
    if result.n_incomplete:
        notes.append(f"{result.n_incomplete} case(s) left out because a rerun errored")
    return make_check(
        "stability.verdict",
        level,
        "stability.ci_low",
        "<=",
        result.epsilon,
        result.ci_low,
        suffix=f" ({'. '.join(notes)})",
    )


def oracle_guidance(stability: StabilityResult | None, blindness: BlindnessResult | None) -> str:
    """One line printed before property results: which oracle the evidence supports.

    A blind suite comes first (its passes are suspect whatever the meter says); then a
    deterministic, an undecided and a stochastic meter.
    """
    if blindness is not None and blindness.blind:
        return (
            f"BLIND — {blindness.skew:.0%} of inputs get '{blindness.modal_label}'. Add inputs "
            "that cross the decision boundary before trusting property or persona passes."
        )
    if stability is None:
        return "NOT MEASURED — add a `diagnostics.stability` section to measure rerun noise."
    if stability.verdict == "deterministic":
        return (
            "STABLE — prefer frozen-baseline diffing: `decflow runs accept RUN`, then "
            "`decflow diff` new runs against it."
        )
    if stability.verdict == "undecided":
        return "UNDECIDED — " + _sizing_hint(stability)
    return (
        "STOCHASTIC — read property violation and flip rates against the measured rerun "
        f"noise ({stability.flips}/{stability.pairs} rerun pairs flipped), not against zero."
    )
