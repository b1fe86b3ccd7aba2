"""The rerun stability meter: is the decision repeatable enough to test against?

Each case is decided k times unchanged. Within a case the reruns are compared in
consecutive, disjoint pairs (1,2), (3,4), … — overlapping pairs would count the same call
twice and overstate the evidence — so an odd last rerun stays out of the interval (it still
counts toward ``cases_with_flip``). A case whose series contains an error is *incomplete*:
its pairs are left out entirely, because two failed calls "agreeing" would certify the
failure.

The case is the sampling unit: the reruns of one case share its text and flip together (a
case near the decision boundary flips often, a clear one never), so pooling pairs as if
independent overstates the evidence. Each complete case contributes its share of flipped
pairs; the flip rate is their mean, and its one-sided 95 % bounds come from
``decflow.metrics.case_rates`` (exact binomial with one pair per case; otherwise exact
binomial on the shares randomly rounded with the run's `rounding_seed`, or Bentkus's bound
for a run recorded without one), valid at every number of cases however the flips cluster.
``stochastic`` when the lower bound is above ε, ``deterministic`` when the upper bound is
below, otherwise ``undecided`` (the gate is then *not established*, with the cases that
would decide it).

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
from typing import Any, Literal

import numpy as np
import polars as pl

from decflow.diagnostics.arrays import label_codes, probability_matrix
from decflow.diagnostics.blindness import BlindnessResult
from decflow.gates.checks import Check, Level, evidence_check, make_check
from decflow.metrics.case_rates import rate_test, shares_by_case
from decflow.metrics.compare import compare
from decflow.metrics.evidence import Evidence
from decflow.metrics.rounded_shares import ROUNDED, ROUNDED_NOTE, uniforms

ROUNDED_AS = "stability"
"""The gate name keying the meter's rounding uniforms (`rounded_shares.uniforms`)."""

Verdict = Literal["stochastic", "deterministic", "undecided"]

VERDICTS: dict[str, Verdict] = {
    "fails": "stochastic", "holds": "deterministic", "not_established": "undecided",
}


@dataclass(frozen=True)
class StabilityResult:
    repeats: int  # the most reruns any case had
    n_cases: int  # complete cases (every rerun decided)
    n_incomplete: int  # cases left out because a rerun errored
    measured_cases: int  # complete cases with at least one pair: the sampling units
    pairs: int
    flips: int
    flip_rate: float | None  # mean over complete cases of each case's share of flipped pairs
    ci_low: float  # one-sided 95 % bounds on it, case as the unit
    ci_high: float
    epsilon: float
    verdict: Verdict
    mean_tv: float | None  # between the two reruns of a pair; None without probabilities
    tv_p95: float | None  # 95th percentile of that TV: the rerun noise floor for persona pairs
    cases_needed: int | None  # cases that would decide at the observed rate; None if none can
    detectable: float | None  # distance from ε this many cases detect with 80 % power
    method: str
    cases_with_flip: int
    advice: str

    @property
    def evidence(self) -> Evidence:
        return Evidence(
            method=self.method,
            n=self.measured_cases,
            verdict={v: k for k, v in VERDICTS.items()}[self.verdict],  # type: ignore[arg-type]
            estimate=self.flip_rate,
            low=self.ci_low,
            high=self.ci_high,
            cases_needed=self.cases_needed,
            detectable=self.detectable,
        )

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


def cases_for_deterministic(epsilon: float, repeats: int) -> int | None:
    """Quiet cases a `deterministic` verdict at ε needs with ``repeats`` reruns per case (the
    same test the meter applies; it does not shrink with more repeats, because a case's
    reruns are not independent evidence)."""
    pairs = repeats // 2
    return rate_test(np.zeros(1), pairs, epsilon).cases_needed


@dataclass(frozen=True)
class _Paired:
    """The reruns sorted by case, and their disjoint pairs over complete cases."""

    case_ids: np.ndarray  # per row
    codes: np.ndarray  # case code per row
    counts: np.ndarray  # rows per case
    positions: np.ndarray  # position of the row within its case
    incomplete: np.ndarray  # per case: a rerun errored
    selected: np.ndarray  # label code per row
    left: np.ndarray  # first row of each pair
    flipped: np.ndarray  # per pair
    tv: np.ndarray | None  # per pair; None without probabilities


def _paired(reruns: pl.DataFrame) -> _Paired:
    table = reruns.sort(["case_id", "repeat"])
    if table.select(pl.struct("case_id", "repeat").is_duplicated().any()).item():
        raise ValueError("rerun table has a (case_id, repeat) pair more than once")
    case_ids = table["case_id"].cast(pl.String).to_numpy()
    errored = table["selected"].is_null().to_numpy()
    if "error_kind" in table.columns:
        errored |= table["error_kind"].is_not_null().to_numpy()
    selected = label_codes(table["selected"])
    probabilities = _probabilities(table)
    if table.height:
        codes, counts, positions = _case_layout(case_ids)
    else:
        codes = counts = positions = np.zeros(0, dtype=np.int64)
    incomplete = np.bincount(codes[errored], minlength=counts.size) > 0
    complete_row = ~incomplete[codes]
    first = (positions % 2 == 0) & (positions + 1 < counts[codes]) & complete_row
    left = np.flatnonzero(first)
    right = left + 1
    tv = None
    if probabilities is not None and left.size:
        tv = compare(
            probabilities[left], probabilities[right], relation="invariant", decision_type="choice"
        ).tv
    return _Paired(case_ids, codes, counts, positions, incomplete, selected, left,
                   selected[left] != selected[right], tv)


def rerun_pairs(reruns: pl.DataFrame) -> pl.DataFrame:
    """The meter's rerun pairs (same input table as `measure_stability`): `case_id`,
    `flipped` and their `tv` (null without probabilities), one row per pair."""
    paired = _paired(reruns)
    tv = paired.tv if paired.tv is not None else np.full(paired.left.size, np.nan)
    return pl.DataFrame(
        {"case_id": paired.case_ids[paired.left], "flipped": paired.flipped, "tv": tv},
        schema={"case_id": pl.String, "flipped": pl.Boolean, "tv": pl.Float64},
    ).with_columns(pl.col("tv").fill_nan(None))


def measure_stability(reruns: pl.DataFrame, *, epsilon: float = 0.05,
                      rounding_seed: int | None = None) -> StabilityResult:
    """Per complete case, the share of its disjoint rerun pairs that flipped; the verdict
    from the case-level bounds on their mean against ε (shares rounded with the uniforms
    of `rounding_seed`; None: Bentkus's bound, as runs recorded without one were judged)."""
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    paired = _paired(reruns)
    codes, counts, positions = paired.codes, paired.counts, paired.positions
    incomplete, selected, left, flipped = (paired.incomplete, paired.selected, paired.left,
                                           paired.flipped)
    n_rows = codes.size
    n_pairs = int(left.size)
    n_flips = int(flipped.sum())

    mean_tv: float | None = None
    tv_p95: float | None = None
    if paired.tv is not None:
        mean_tv = math.fsum(paired.tv.tolist()) / n_pairs
        tv_p95 = float(np.percentile(paired.tv, 95))

    # Any disagreement among all k reruns of a case, the odd last one included.
    n_complete = int((~incomplete).sum())
    if n_rows:
        starts = np.flatnonzero(positions == 0)
        low = np.minimum.reduceat(selected, starts)
        high = np.maximum.reduceat(selected, starts)
        cases_with_flip = int(((low != high) & ~incomplete).sum())
    else:
        cases_with_flip = 0

    shares, most_pairs = shares_by_case(codes[left], flipped)
    # The case id of each share (shares_by_case keeps code order) keys its uniform.
    draws = None if rounding_seed is None else uniforms(
        rounding_seed, ROUNDED_AS, paired.case_ids[positions == 0][np.unique(codes[left])])
    test = rate_test(shares, most_pairs, epsilon, uniforms=draws)
    repeats = int(counts.max()) if counts.size else 0
    partial = StabilityResult(
        repeats=repeats,
        n_cases=n_complete,
        n_incomplete=int(incomplete.sum()),
        measured_cases=test.n,
        pairs=n_pairs,
        flips=n_flips,
        flip_rate=test.estimate,
        ci_low=test.low if test.low is not None else 0.0,
        ci_high=test.high if test.high is not None else 1.0,
        epsilon=epsilon,
        verdict=VERDICTS[test.verdict()],
        mean_tv=mean_tv,
        tv_p95=tv_p95,
        cases_needed=test.cases_needed,
        detectable=test.detectable,
        method=test.method,
        cases_with_flip=cases_with_flip,
        advice="",
    )
    return replace(partial, advice=stability_advice(partial))


def _interval(result: StabilityResult) -> str:
    return f"[{result.ci_low:.3f}, {result.ci_high:.3f}]"


def stability_advice(result: StabilityResult) -> str:
    """What the verdict means for choosing an oracle, with the numbers that support it."""
    counts = (f"{result.flips} of {result.pairs} rerun pairs disagreed over "
              f"{result.n_cases} cases")
    eps = f"{result.epsilon:g}"
    if result.verdict == "deterministic":
        return (
            f"deterministic: {counts} (95% per side {_interval(result)}, below ε = {eps}). "
            "Prefer frozen-baseline diffing: accept a run with `decflow runs accept RUN` and "
            "compare later runs against it with `decflow diff`."
        )
    if result.verdict == "stochastic":
        noise = "" if result.mean_tv is None else f", mean TV {result.mean_tv:.3f}"
        return (
            f"stochastic: {counts} (95% per side {_interval(result)}, above ε = {eps}{noise}). "
            "Compare property violation and flip rates with this measured rerun noise, "
            "not with zero."
        )
    return f"undecided: {counts} (95% per side {_interval(result)} contains ε = {eps}). " + (
        _sizing_hint(result)
    )


def _sizing_hint(result: StabilityResult) -> str:
    needed = result.cases_needed
    if needed is None:
        return (
            "The observed flip rate sits at ε, so more cases will not separate it; "
            "choose the tolerance the decision really needs."
        )
    rate = 0.0 if result.flip_rate is None else result.flip_rate
    head = f"About {needed} cases would decide it if the flip rate stays at {rate:.3g}"
    if result.n_cases == 0:
        return f"{head}; no complete case was measured yet."
    more = max(needed - result.n_cases, 1)
    return (
        f"{head} ({more} more at {max(result.repeats, 2)} repeats; the reruns of one case are "
        "correlated, so more repeats on the same cases help less than more cases)."
    )


def stability_check(result: StabilityResult, level: Level) -> Check:
    """`stability.verdict`: fails (at ``level``) when the evidence shows the flip rate above
    ε (stochastic), passes when it shows it below (deterministic), and is *not established*
    otherwise; *not exercised* (a failure) when no complete rerun pair was measured: no
    evidence is never a pass."""
    if result.pairs == 0:
        reason = (
            f"not exercised: no complete rerun pair ({result.n_incomplete} case(s) left out "
            "because a rerun errored)" if result.n_incomplete
            else "not exercised: no case had two reruns to compare"
        )
        return make_check(
            "stability.verdict", level, "stability.flip_rate", "<=", result.epsilon, None,
            reason_if_null=reason,
        )
    notes = [
        f"{result.verdict}: {result.flips}/{result.pairs} pairs over {result.measured_cases} cases"
    ]
    if result.n_incomplete:
        notes.append(f"{result.n_incomplete} case(s) left out because a rerun errored")
    if result.method == ROUNDED:
        notes.append(ROUNDED_NOTE)
    return evidence_check(
        "stability.verdict",
        level,
        "stability.flip_rate",
        "<=",
        result.epsilon,
        result.evidence,
        suffix=f" ({'; '.join(notes)})",
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
