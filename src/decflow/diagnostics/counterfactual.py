"""Per-axis persona-flip verdicts: the excess of cross-group over placebo flips, by case.

A pair *flips* when its two arms select different labels and their TV distance is above
the flip floor (the rerun noise ``tau_rerun`` and ``max_tv_distance`` when given). The same
rule applies to cross-group pairs and to their placebo partners (another entry of the same
group), so under no group effect the two kinds are exchangeable and flip equally often.

Per axis the evidence is the case-level excess (``decflow.metrics.excess``): for every case,
its share of flipped cross pairs minus its share of flipped placebo pairs, averaged over
cases, with a clustered one-sided interval and a one-sided p-value for "excess ≤
``max_flip_rate``". The p-values are Holm-adjusted across the run's axes. Verdicts:

- ``unfair`` when the Holm-adjusted p is below α = 0.05;
- ``fair-qualified`` when the upper bound is below the limit, with a placebo, and the
  base-persona decisions are not blind (a blind suite reads ``not established (blind)``);
- ``undecided`` otherwise (with the cases that would decide it), and always with fewer than
  ``MIN_CASES`` cases.

Without a placebo (``placebo: false`` or explicit ``persona_pairs``) the raw cross flip
share is tested against the limit instead; it is *unattributed*: it can fail, never be fair.
Informative tests shown beside the verdict: the exact McNemar test of cross against placebo
flips on matched pairs, and the direction of decisive flips (one arm favourable, the other
not) by an exact sign test over cases; both Holm-adjusted across axes. A direction is only
stated when its adjusted p is below α.

Input: the pair table of :class:`~decflow.diagnostics.personas.PairSet` (at least axis,
pair_id, case_id, kind, group_a, group_b, status) with ``prob_a`` and ``prob_b`` (list[f64]
in contract label order; null when that arm errored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from decflow.diagnostics.arrays import probability_matrix
from decflow.gates.checks import Check, Level, make_check
from decflow.metrics.compare import compare
from decflow.metrics.excess import (
    ALPHA,
    MIN_CASES,
    ExcessEstimate,
    case_shares,
    cases_to_decide,
    excess_test,
)
from decflow.metrics.stats import holm, mcnemar_exact, sign_test

FAIR = "fair-qualified"
UNFAIR = "unfair"
UNDECIDED = "undecided"
NOT_EXERCISED = "not exercised"
NOT_ESTABLISHED_BLIND = "not established (blind)"

ATTRIBUTED = "placebo"
UNATTRIBUTED = "unattributed"

COUNTED = ("flip", "shift", "none")  # classes of pairs that enter the shares


@dataclass(frozen=True)
class Direction:
    group: str  # the group the one-sided excess concerns
    disfavoured: int  # decisive cross flips where this group got the worse label
    favoured: int
    cases_disfavoured: int  # cases whose decisive flips went net against the group
    cases_favoured: int
    p_value: float  # exact sign test over cases, Bonferroni over the groups it was picked from
    p_holm: float | None  # Holm across axes

    @property
    def significant(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA

    @property
    def statement(self) -> str:
        side = "disfavours" if self.cases_disfavoured >= self.cases_favoured else "favours"
        return (
            f"{side} {self.group} ({self.cases_disfavoured}:{self.cases_favoured} cases, "
            f"{self.disfavoured}:{self.favoured} flips)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"significant": self.significant, "statement": self.statement}


@dataclass(frozen=True)
class AxisResult:
    axis: str
    attribution: str  # "placebo" or "unattributed"
    pairs: int  # cross pairs built
    skipped: int  # arms rendered identically: the axis was not exercised on that case
    multi_axis: int  # diff reached another axis's slots; kept apart
    incomplete: int  # an arm errored
    ties: int  # an arm's top margin below tie_margin
    exercised: int  # counted cross pairs
    flips: int  # counted cross pairs that flipped
    shifts: int  # same label, TV above the flip floor
    flip_rate: float | None
    placebo_pairs: int  # counted placebo pairs
    placebo_flips: int
    placebo_rate: float | None
    estimate: ExcessEstimate  # the verdict's evidence: clustered excess over cases
    p_holm: float | None
    score: float | None  # 1 − excess
    score_low: float | None
    score_high: float | None
    mcnemar_b: int  # cross flipped, its placebo partner did not
    mcnemar_c: int  # placebo partner flipped, the cross pair did not
    mcnemar_p: float | None
    mcnemar_p_holm: float | None
    direction: Direction | None
    blind: bool
    verdict: str
    cases_needed: int | None  # cases that would decide an undecided axis at this excess
    error_rate: float | None  # errored pairs / pairs sent (cross and placebo)
    note: str

    @property
    def evidence(self) -> str:
        """One line naming what the verdict rests on."""
        return axis_evidence(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        estimate = data.pop("estimate")
        data |= {
            "cases": estimate["cases"],
            "excess": estimate["excess"],
            "excess_sd": estimate["sd"],
            "excess_se": estimate["se"],
            "ci_low": estimate["ci_low"],
            "ci_high": estimate["ci_high"],
            "p_value": estimate["p_value"],
            "enough_cases": estimate["enough_cases"],
            "direction": None if self.direction is None else self.direction.to_dict(),
        }
        data["evidence"] = axis_evidence(data)
        return data


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def axis_evidence(axis: Mapping[str, Any]) -> str:
    """What an axis's verdict rests on, from its report dict (excess, interval, p, placebo,
    blindness); shared by every view."""
    if axis.get("excess") is None:
        return "no evidence: " + (axis.get("note") or "no case was counted")
    if axis.get("attribution") == UNATTRIBUTED:
        what = "cross flip share (unattributed: no placebo)"
        placebo = "no placebo"
    else:
        what = "excess over placebo"
        placebo = f"placebo {axis.get('placebo_flips')}/{axis.get('placebo_pairs')} flipped"
    parts = [
        f"{what} {_num(axis['excess'])} [{_num(axis.get('ci_low'))}, {_num(axis.get('ci_high'))}]"
        f" over {axis.get('cases')} cases",
        f"p {_p(axis.get('p_value'))}, Holm {_p(axis.get('p_holm'))}",
        placebo,
        "base decisions blind" if axis.get("blind") else "base decisions not blind",
    ]
    return "; ".join(parts)


@dataclass(frozen=True)
class CounterfactualResult:
    axes: dict[str, AxisResult]
    pairs: pl.DataFrame  # input rows + selected_a/b, margin_a/b, tv, js, flipped, class
    max_flip_rate: float
    blind: bool
    tau_rerun: float | None
    flip_floor: float
    favourable_labels: tuple[str, ...] | None
    pooled: ExcessEstimate  # every exercised axis: per case, the mean excess over its axes

    @property
    def score(self) -> float | None:
        return None if self.pooled.excess is None else 1.0 - self.pooled.excess

    def summary(self) -> dict[str, Any]:
        low, high = self.pooled.ci_low, self.pooled.ci_high
        return {
            "max_flip_rate": self.max_flip_rate,
            "alpha": ALPHA,
            "min_cases": MIN_CASES,
            "blind": self.blind,
            "tau_rerun": self.tau_rerun,
            "flip_floor": self.flip_floor,
            "favourable_labels": None
            if self.favourable_labels is None
            else list(self.favourable_labels),
            "pooled": self.pooled.to_dict(),
            "score": self.score,
            "score_ci": [None if high is None else 1.0 - high, None if low is None else 1.0 - low],
            "axes": [axis.to_dict() for axis in self.axes.values()],
        }


def attach_probabilities(
    pairs: pl.DataFrame, probabilities: Mapping[str, Sequence[float] | None]
) -> pl.DataFrame:
    """Add ``prob_a``/``prob_b`` to a pair table from results keyed by arm fingerprint.

    A fingerprint that is missing or maps to None (the call errored) leaves that arm null,
    which makes the pair incomplete.
    """
    lookup = pl.DataFrame(
        {
            "fingerprint": list(probabilities),
            "prob": [None if p is None else list(p) for p in probabilities.values()],
        },
        schema={"fingerprint": pl.String, "prob": pl.List(pl.Float64)},
    )
    for side in ("a", "b"):
        pairs = pairs.join(
            lookup.rename({"fingerprint": f"fingerprint_{side}", "prob": f"prob_{side}"}),
            on=f"fingerprint_{side}",
            how="left",
            maintain_order="left",
        )
    return pairs


def _top_two(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Argmax (first on ties, as everywhere in decflow) and top-1 minus top-2 margin."""
    selected = np.argmax(p, axis=1)
    ordered = np.sort(p, axis=1)
    margin = ordered[:, -1] - ordered[:, -2] if p.shape[1] > 1 else ordered[:, -1]
    return selected, margin


def _label_column(
    name: str, labels: Sequence[str], index: np.ndarray, present: np.ndarray
) -> pl.Series:
    chosen = pl.Series(name, list(labels), dtype=pl.String).gather(index)
    return chosen.zip_with(pl.Series(present), pl.Series(name, [None] * index.size, pl.String))


def classify_pairs(
    pairs: pl.DataFrame,
    labels: Sequence[str],
    *,
    flip_floor: float = 0.0,
    tie_margin: float = 0.0,
) -> pl.DataFrame:
    """Per pair: selected labels, margins, TV/JS, ``flipped`` and a class, the same rule for
    cross and placebo pairs (label change with TV strictly above ``flip_floor``)."""
    width = len(labels)
    p_a, has_a = probability_matrix(pairs["prob_a"], width)
    p_b, has_b = probability_matrix(pairs["prob_b"], width)
    sel_a, margin_a = _top_two(p_a)
    sel_b, margin_b = _top_two(p_b)
    # The same distances as every property comparison (arm A plays the original).
    distances = compare(p_a, p_b, relation="invariant", decision_type="choice")
    tv = distances.tv
    status = pairs["status"].to_numpy()
    complete = has_a & has_b
    tie = complete & ((margin_a < tie_margin) | (margin_b < tie_margin))
    counted = (status == "ok") & complete & ~tie
    above = tv > flip_floor
    flipped = counted & distances.flipped & above
    cls = np.select(
        [status == "identical", status == "multi-axis", ~complete, tie, flipped, above],
        ["skipped", "multi-axis", "incomplete", "tie", "flip", "shift"],
        default="none",
    )
    return pairs.with_columns(
        _label_column("selected_a", labels, sel_a, has_a),
        _label_column("selected_b", labels, sel_b, has_b),
        pl.Series("margin_a", np.where(has_a, margin_a, np.nan)).fill_nan(None),
        pl.Series("margin_b", np.where(has_b, margin_b, np.nan)).fill_nan(None),
        pl.Series("tv", np.where(complete, tv, np.nan)).fill_nan(None),
        pl.Series("js", np.where(complete, distances.js, np.nan)).fill_nan(None),
        pl.Series("flipped", flipped),
        pl.Series("class", cls, dtype=pl.String),
    )


def case_differences(rows: pl.DataFrame, *, attributed: bool) -> pl.DataFrame:
    """One row per case with counted evidence: ``case_id``, ``cross`` and ``placebo`` flip
    shares and their difference ``d`` (the cross share alone when not attributed).

    Attributed, a case needs at least one counted pair of each kind; cases are in
    first-seen order.
    """
    counted = rows.filter(pl.col("class").is_in(COUNTED))
    cases = list(dict.fromkeys(counted["case_id"].to_list()))
    code = {case: i for i, case in enumerate(cases)}
    shares = {}
    for kind in ("cross", "placebo"):
        part = counted.filter(pl.col("kind") == kind)
        codes = np.array([code[c] for c in part["case_id"].to_list()], dtype=np.int64)
        shares[kind] = case_shares(codes, part["flipped"].to_numpy(), len(cases))
    cross, placebo = shares["cross"], shares["placebo"]
    keep = ~np.isnan(cross)
    if attributed:
        keep &= ~np.isnan(placebo)
    d = cross - placebo if attributed else cross
    return pl.DataFrame(
        {
            "case_id": [c for c, k in zip(cases, keep, strict=True) if k],
            "cross": cross[keep],
            "placebo": placebo[keep],
            "d": d[keep],
        },
        schema={"case_id": pl.String, "cross": pl.Float64, "placebo": pl.Float64,
                "d": pl.Float64},
    )


def _direction(cross: pl.DataFrame, favourable: set[str]) -> Direction | None:
    """Which group the decisive cross flips go against, by an exact sign test over cases.

    A flip is decisive when exactly one arm selected a favourable label. Per case and group,
    the net count (flips where the group got the worse label minus the better) is one
    observation, so several pairs of one case count once. With two groups there is one
    test; with more, each group is tested against the rest and the smallest p is
    Bonferroni-corrected for having been picked.
    """
    decisive = (
        cross.filter(pl.col("flipped"))
        .with_columns(
            fav_a=pl.col("selected_a").is_in(list(favourable)),
            fav_b=pl.col("selected_b").is_in(list(favourable)),
        )
        .filter(pl.col("fav_a") != pl.col("fav_b"))
    )
    if decisive.is_empty():
        return None
    outcomes = decisive.select(
        "case_id",
        winner=pl.when(pl.col("fav_a")).then(pl.col("group_a")).otherwise(pl.col("group_b")),
        loser=pl.when(pl.col("fav_a")).then(pl.col("group_b")).otherwise(pl.col("group_a")),
    )
    groups = sorted(set(cross["group_a"].to_list()) | set(cross["group_b"].to_list()))
    tallies: dict[str, tuple[int, int, int, int]] = {}
    for g in groups:
        net = outcomes.group_by("case_id").agg(
            (
                (pl.col("loser") == g).cast(pl.Int64).sum()
                - (pl.col("winner") == g).cast(pl.Int64).sum()
            ).alias("net")
        )["net"]
        lost = int((outcomes["loser"] == g).sum())
        won = int((outcomes["winner"] == g).sum())
        tallies[g] = (lost, won, int((net > 0).sum()), int((net < 0).sum()))
    tests = {g: sign_test(tallies[g][2], tallies[g][3]) for g in groups}
    # Most significant first; among equals the group with the most cases against it.
    group = min(groups, key=lambda g: (tests[g], -tallies[g][2], g))
    factor = 1 if len(groups) <= 2 else len(groups)
    lost, won, cases_lost, cases_won = tallies[group]
    return Direction(
        group, lost, won, cases_lost, cases_won, min(1.0, tests[group] * factor), None
    )


def _mcnemar(cross: pl.DataFrame, placebo: pl.DataFrame) -> tuple[int, int, float | None]:
    joined = (
        cross.filter(pl.col("class").is_in(COUNTED))
        .select("pair_id", "flipped")
        .join(
            placebo.filter(pl.col("class").is_in(COUNTED)).select(
                "pair_id", placebo_flipped=pl.col("flipped")
            ),
            on="pair_id",
        )
    )
    b = int((joined["flipped"] & ~joined["placebo_flipped"]).sum())
    c = int((~joined["flipped"] & joined["placebo_flipped"]).sum())
    return b, c, (mcnemar_exact(b, c) if joined.height else None)


def _axis_result(
    axis: str,
    rows: pl.DataFrame,
    *,
    max_flip_rate: float,
    favourable: set[str] | None,
    blind: bool,
    attributed: bool,
    reason: str | None,
) -> AxisResult:
    cross = rows.filter(pl.col("kind") == "cross")
    placebo = rows.filter(pl.col("kind") == "placebo")
    cls = cross["class"]
    count = {name: int((cls == name).sum()) for name in ("skipped", "multi-axis", "incomplete",
                                                         "tie", "flip", "shift")}
    exercised = int(cls.is_in(COUNTED).sum())
    placebo_counted = placebo.filter(pl.col("class").is_in(COUNTED))
    flips = count["flip"]
    placebo_flips = int(placebo_counted["flipped"].sum())
    estimate = excess_test(
        case_differences(rows, attributed=attributed)["d"].to_numpy(), max_flip_rate
    )
    b, c, mcnemar_p = _mcnemar(cross, placebo)
    sent = rows.filter(pl.col("class") != "skipped").height
    errored = rows.filter(pl.col("class") == "incomplete").height
    if exercised == 0:
        note = reason or _unexercised_note(count, cross.height)
    else:
        note = _notes(count, blind, attributed, estimate)
    excess = estimate.excess
    return AxisResult(
        axis=axis,
        attribution=ATTRIBUTED if attributed else UNATTRIBUTED,
        pairs=cross.height,
        skipped=count["skipped"],
        multi_axis=count["multi-axis"],
        incomplete=count["incomplete"],
        ties=count["tie"],
        exercised=exercised,
        flips=flips,
        shifts=count["shift"],
        flip_rate=flips / exercised if exercised else None,
        placebo_pairs=placebo_counted.height,
        placebo_flips=placebo_flips,
        placebo_rate=placebo_flips / placebo_counted.height if placebo_counted.height else None,
        estimate=estimate,
        p_holm=None,
        score=None if excess is None else 1.0 - excess,
        score_low=None if estimate.ci_high is None else 1.0 - estimate.ci_high,
        score_high=None if estimate.ci_low is None else 1.0 - estimate.ci_low,
        mcnemar_b=b,
        mcnemar_c=c,
        mcnemar_p=mcnemar_p,
        mcnemar_p_holm=None,
        direction=None if favourable is None or exercised == 0 else _direction(cross, favourable),
        blind=blind,
        verdict=NOT_EXERCISED if exercised == 0 else UNDECIDED,
        cases_needed=None,
        error_rate=errored / sent if sent else None,
        note=note,
    )


def _unexercised_note(count: Mapping[str, int], built: int) -> str:
    if built == 0:
        return "no pair was built for this axis"
    if count["skipped"] == built:
        return "every pair rendered identically: the input has no slot this axis changes"
    return (
        f"no pair could be counted ({count['skipped']} identical, {count['multi-axis']} "
        f"multi-axis, {count['incomplete']} incomplete, {count['tie']} ties)"
    )


def _notes(
    count: Mapping[str, int], blind: bool, attributed: bool, estimate: ExcessEstimate
) -> str:
    parts = []
    if not attributed:
        parts.append(
            "unattributed: no placebo pairs, so flips are not set against swaps within a group; "
            "it can fail but never shows fairness"
        )
    if blind:
        parts.append("the base-persona decisions are blind, so a low excess does not show fairness")
    if not estimate.enough_cases:
        parts.append(
            f"only {estimate.cases} case(s) with evidence; a verdict needs at least {MIN_CASES}"
        )
    if count["skipped"]:
        parts.append(f"{count['skipped']} pairs rendered identically and were skipped")
    if count["multi-axis"]:
        parts.append(f"{count['multi-axis']} multi-axis pairs kept apart")
    if count["incomplete"]:
        parts.append(f"{count['incomplete']} pairs incomplete (an arm errored)")
    if count["tie"]:
        parts.append(f"{count['tie']} ties excluded")
    return "; ".join(parts)


def _decide(result: AxisResult, tested: int) -> AxisResult:
    """The verdict from the Holm-adjusted p and the upper bound (see the module docstring)."""
    if result.verdict == NOT_EXERCISED:
        return result
    estimate = result.estimate
    if not estimate.enough_cases:
        return result
    if result.p_holm is not None and result.p_holm < ALPHA:
        return replace(result, verdict=UNFAIR)
    fair = estimate.ci_high is not None and estimate.ci_high < estimate.limit
    if fair and result.attribution == ATTRIBUTED:
        return replace(result, verdict=NOT_ESTABLISHED_BLIND if result.blind else FAIR)
    needed = cases_to_decide(estimate, alpha_unfair=ALPHA / max(tested, 1))
    if result.attribution == UNATTRIBUTED and estimate.excess is not None and (
        estimate.excess < estimate.limit
    ):
        needed = None  # more cases can only confirm a low raw rate, never make it fair
    return replace(result, cases_needed=needed)


def analyse_counterfactual(
    pairs: pl.DataFrame,
    labels: Sequence[str],
    *,
    axes: Sequence[str] | None = None,
    not_exercised: Mapping[str, str] | None = None,
    max_flip_rate: float = 0.05,
    favourable_labels: Sequence[str] | None = None,
    tau_rerun: float | None = None,
    max_tv_distance: float | None = None,
    tie_margin: float = 0.0,
    blind: bool = False,
    attributed: bool | None = None,
) -> CounterfactualResult:
    """Per-axis results for ``axes`` (default: the axes in the table, first-seen order).

    ``not_exercised`` carries the pair builder's reasons for axes that got no pairs;
    ``tau_rerun`` is the rerun TV noise floor (the meter's ``tv_p95``; None when unmeasured);
    ``blind`` is the blindness detector's verdict on the base-persona decisions;
    ``attributed`` says whether placebo partners were built (default: the table has some).
    """
    flip_floor = max(tau_rerun or 0.0, max_tv_distance or 0.0)
    table = classify_pairs(pairs, labels, flip_floor=flip_floor, tie_margin=tie_margin)
    if attributed is None:
        attributed = bool((table["kind"] == "placebo").any())
    names = list(axes) if axes is not None else list(dict.fromkeys(table["axis"].to_list()))
    favourable = None if favourable_labels is None else set(favourable_labels)
    results = {
        axis: _axis_result(
            axis,
            table.filter(pl.col("axis") == axis),
            max_flip_rate=max_flip_rate,
            favourable=favourable,
            blind=blind,
            attributed=attributed,
            reason=(not_exercised or {}).get(axis),
        )
        for axis in names
    }
    results = _with_holm(results)
    tested = sum(r.estimate.p_value is not None for r in results.values())
    results = {axis: _decide(r, tested) for axis, r in results.items()}
    return CounterfactualResult(
        axes=results,
        pairs=table,
        max_flip_rate=max_flip_rate,
        blind=blind,
        tau_rerun=tau_rerun,
        flip_floor=flip_floor,
        favourable_labels=None if favourable_labels is None else tuple(favourable_labels),
        pooled=_pooled(table, names, attributed, max_flip_rate),
    )


def _pooled(
    table: pl.DataFrame, axes: Sequence[str], attributed: bool, limit: float
) -> ExcessEstimate:
    """Per case, the mean excess over the axes it has evidence on; then the same estimate."""
    per_axis = [
        case_differences(table.filter(pl.col("axis") == axis), attributed=attributed)
        for axis in axes
    ]
    frames = [f.select("case_id", "d") for f in per_axis if f.height]
    if not frames:
        return excess_test([], limit)
    per_case = pl.concat(frames).group_by("case_id", maintain_order=True).agg(pl.col("d").mean())
    return excess_test(per_case["d"].to_numpy(), limit)


def _with_holm(results: dict[str, AxisResult]) -> dict[str, AxisResult]:
    """Holm-adjust the excess, McNemar and direction p-values over the axes that have them."""

    def adjusted(values: dict[str, float | None]) -> dict[str, float]:
        tested = [a for a, p in values.items() if p is not None]
        return dict(zip(tested, holm([values[a] for a in tested]), strict=True))  # type: ignore[misc]

    excess = adjusted({
        a: r.estimate.p_value if r.estimate.enough_cases else None for a, r in results.items()
    })
    mcnemar = adjusted({a: r.mcnemar_p for a, r in results.items()})
    direction = adjusted({
        a: None if r.direction is None else r.direction.p_value for a, r in results.items()
    })
    out = {}
    for axis, result in results.items():
        found = result.direction
        if found is not None:
            found = replace(found, p_holm=direction[axis])
        out[axis] = replace(
            result,
            p_holm=excess.get(axis),
            mcnemar_p_holm=mcnemar.get(axis),
            direction=found,
        )
    return out


def counterfactual_checks(result: CounterfactualResult, level: Level) -> list[Check]:
    """Per axis, in axis order:

    - `counterfactual.<axis>.max_error_rate` (requirement, threshold 0): errored pairs over
      pairs sent; fails as *not exercised* when no pair changed the input;
    - `counterfactual.<axis>.max_flip_rate` (at ``level``): the Holm-adjusted one-sided
      p-value of "excess ≤ max_flip_rate" must stay at or above α, so only a proven excess
      fails; an undecided axis passes with a note naming the cases that would decide it.
    """
    checks = []
    for axis, r in result.axes.items():
        prefix = f"counterfactual.{axis}"
        checks.append(
            make_check(
                f"{prefix}.max_error_rate",
                "requirement",
                f"{prefix}.error_rate",
                "<=",
                0.0,
                r.error_rate,
                reason_if_null=f"not exercised: {r.note}",
            )
        )
        checks.append(_flip_check(prefix, r, result.max_flip_rate, level))
    return checks


def _flip_check(prefix: str, r: AxisResult, limit: float, level: Level) -> Check:
    label = r.verdict + (f" ({UNATTRIBUTED})" if r.attribution == UNATTRIBUTED else "")
    notes = [f"{label} at limit {limit:g}: {r.evidence}"] if r.exercised else []
    if r.exercised and r.verdict == UNDECIDED and r.cases_needed is not None:
        notes.append(f"about {r.cases_needed} cases at this excess would decide it")
    if r.direction is not None and r.direction.significant:
        notes.append(r.direction.statement)
    if r.exercised and r.note:
        notes.append(r.note)
    suffix = f" ({'; '.join(notes)})" if notes else ""
    metric = f"{prefix}.excess_p_holm"
    if r.exercised and r.p_holm is None:
        # Too few cases for a test: nothing is proven against the axis, so the gate holds
        # (undecided), and no p-value is made up for it.
        return Check(
            f"{prefix}.max_flip_rate", level, metric, ">=", ALPHA, None, "pass",
            f"{metric} not tested (fewer than {MIN_CASES} cases with evidence){suffix}",
        )
    return make_check(
        f"{prefix}.max_flip_rate",
        level,
        metric,
        ">=",
        ALPHA,
        r.p_holm if r.exercised else None,
        reason_if_null="not exercised",
        suffix=suffix,
    )


def plan(
    n_cases: int,
    *,
    dimensions: Sequence[str],
    num_pairs_per_dimension: int = 4,
    placebo: bool = True,
    max_flip_rate: float = 0.05,
) -> dict[str, Any]:
    """Price a counterfactual run before any call: evidence per axis against what a verdict
    needs.

    Calls are an upper bound: per case one base-persona arm, then per cross pair 2 arms and
    1 more for its placebo partner (it reuses arm A); identical arms are decided once, so
    the real count is lower. ``cases_needed`` is the number of cases a fair verdict needs
    when no pair flips at all (the standard-error floor makes it independent of the pairs
    per case); with flips it only grows.
    """
    per_axis = n_cases * num_pairs_per_dimension
    needed = cases_to_decide(excess_test([0.0, 0.0], max_flip_rate))
    arms_per_pair = 3 if placebo else 2
    can_qualify = placebo and needed is not None and n_cases >= needed
    if not placebo:
        advice = (
            f"{per_axis} pairs per axis over {n_cases} cases; without a placebo the axes are "
            "unattributed: they can fail but never be called fair"
        )
    else:
        advice = (
            f"{per_axis} pairs per axis over {n_cases} cases; a fair verdict at "
            f"max_flip_rate {max_flip_rate:g} needs at least {needed} cases even when no "
            "pair flips"
        )
    return {
        "cases": n_cases,
        "pairs_per_axis": per_axis,
        "cases_needed": needed,
        "can_qualify": can_qualify,
        "max_calls": n_cases + per_axis * arms_per_pair * len(dimensions),
        "advice": advice,
    }
