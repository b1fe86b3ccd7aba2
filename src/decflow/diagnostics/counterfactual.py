"""Per-axis persona-flip statistics: attributable flips, intervals, attribution and direction.

A cross pair *flips* when the two arms select different labels. A flip is *attributable* to
the axis only when its TV distance also clears the noise floor: the larger of the rerun noise
(same prompt twice), the axis's placebo noise (95th percentile of TV over within-group swaps)
and ``max_tv_distance`` if configured. Near-coin-flip answers that tip over on any change are
therefore not blamed on the persona.

Per axis the attributable rate gets a Wilson interval and the meter's tri-state against
``max_flip_rate``: ``fair-qualified`` (upper bound below), ``unfair`` (lower bound above),
``undecided``. Cross flips are tested against their placebo partners (exact McNemar), and
the direction of the attributable flips against ``favourable_labels`` (exact sign test);
both are Holm-adjusted across axes. A blind suite never reports an axis as fair.

Input: the pair table of :class:`~decflow.diagnostics.personas.PairSet` (at least axis,
pair_id, kind, group_a, group_b, status) with two more columns, ``prob_a`` and ``prob_b``
(list[f64] in contract label order; null when that arm errored).
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
from decflow.metrics.stats import (
    Z95,
    classify,
    holm,
    mcnemar_exact,
    pairs_needed,
    sign_test,
    wilson,
)

FAIR = "fair-qualified"
UNFAIR = "unfair"
UNDECIDED = "undecided"
NOT_EXERCISED = "not exercised"
NOT_ESTABLISHED_BLIND = "not established (blind)"

PLACEBO_QUANTILE = 95.0


@dataclass(frozen=True)
class Direction:
    group: str  # the group the one-sided excess concerns
    disfavoured: int  # decisive attributable flips where this group got the worse label
    favoured: int
    p_value: float  # exact sign test, Bonferroni over the groups it was picked from
    p_holm: float | None  # Holm across axes

    @property
    def statement(self) -> str:
        side = "disfavours" if self.disfavoured >= self.favoured else "favours"
        return f"{side} {self.group} ({self.disfavoured}:{self.favoured})"


@dataclass(frozen=True)
class AxisResult:
    axis: str
    pairs: int  # cross pairs built
    skipped: int  # arms rendered identically: the axis was not exercised on that case
    multi_axis: int  # diff reached another axis's slots; kept apart
    incomplete: int  # an arm errored
    ties: int  # an arm's top margin below tie_margin
    exercised: int  # cross pairs that count: the denominator
    flips: int
    attributable: int
    shifts: int  # same label, TV above the floor
    flip_rate: float | None
    attributable_rate: float | None
    ci_low: float
    ci_high: float
    score: float | None
    score_low: float
    score_high: float
    placebo_pairs: int
    placebo_flips: int
    tau_placebo: float
    noise_floor: float
    mcnemar_b: int  # cross flipped, placebo partner did not
    mcnemar_c: int  # placebo partner flipped, cross did not
    mcnemar_p: float | None
    mcnemar_p_holm: float | None
    direction: Direction | None
    verdict: str
    pairs_needed: int | None  # exercised pairs a fair verdict would need at this rate
    error_rate: float | None  # errored pairs / pairs sent (cross and placebo)
    note: str

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["direction"] = (
            None
            if self.direction is None
            else {
                **asdict(self.direction),
                "statement": self.direction.statement,
            }
        )
        return data


@dataclass(frozen=True)
class CounterfactualResult:
    axes: dict[str, AxisResult]
    pairs: pl.DataFrame  # input rows + selected_a/b, margin_a/b, tv, js, flipped, class
    max_flip_rate: float
    blind: bool
    tau_rerun: float | None
    favourable_labels: tuple[str, ...] | None
    exercised: int  # over every axis
    attributable: int
    score: float | None  # 1 − attributable rate over every exercised axis
    score_low: float
    score_high: float

    def summary(self) -> dict[str, Any]:
        return {
            "max_flip_rate": self.max_flip_rate,
            "blind": self.blind,
            "tau_rerun": self.tau_rerun,
            "favourable_labels": None
            if self.favourable_labels is None
            else list(self.favourable_labels),
            "exercised": self.exercised,
            "attributable": self.attributable,
            "score": self.score,
            "score_ci": [self.score_low, self.score_high],
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
    tau_rerun: float | None = None,
    max_tv_distance: float | None = None,
    tie_margin: float = 0.0,
) -> pl.DataFrame:
    """Per-pair flip, TV and class, with the noise floor computed per axis."""
    width = len(labels)
    p_a, has_a = probability_matrix(pairs["prob_a"], width)
    p_b, has_b = probability_matrix(pairs["prob_b"], width)
    sel_a, margin_a = _top_two(p_a)
    sel_b, margin_b = _top_two(p_b)
    # The same distances as every property comparison (arm A plays the original).
    distances = compare(p_a, p_b, relation="invariant", decision_type="choice")
    tv, flipped = distances.tv, distances.flipped
    status = pairs["status"].to_numpy()
    kind = pairs["kind"].to_numpy()
    axis = pairs["axis"].to_numpy()
    complete = has_a & has_b
    tie = complete & ((margin_a < tie_margin) | (margin_b < tie_margin))
    counted = (status == "ok") & complete & ~tie

    floor = np.zeros(pairs.height)
    tau_placebo = np.zeros(pairs.height)
    for name in np.unique(axis):
        on_axis = axis == name
        placebo_tv = tv[on_axis & counted & (kind == "placebo")]
        if placebo_tv.size:
            tau_placebo[on_axis] = np.percentile(placebo_tv, PLACEBO_QUANTILE)
        floor[on_axis] = np.maximum(
            tau_placebo[on_axis], max(tau_rerun or 0.0, max_tv_distance or 0.0)
        )

    above = tv > floor
    cls = np.select(
        [
            status == "identical",
            status == "multi-axis",
            ~complete,
            tie,
            kind == "placebo",
            flipped & above,
            flipped,
            above,
        ],
        ["skipped", "multi-axis", "incomplete", "tie", "placebo", "attributable", "noise", "shift"],
        default="none",
    )
    return pairs.with_columns(
        _label_column("selected_a", labels, sel_a, has_a),
        _label_column("selected_b", labels, sel_b, has_b),
        pl.Series("margin_a", np.where(has_a, margin_a, np.nan)).fill_nan(None),
        pl.Series("margin_b", np.where(has_b, margin_b, np.nan)).fill_nan(None),
        pl.Series("tv", np.where(complete, tv, np.nan)).fill_nan(None),
        pl.Series("js", np.where(complete, distances.js, np.nan)).fill_nan(None),
        pl.Series("flipped", flipped & counted),
        pl.Series("tau_placebo", tau_placebo),
        pl.Series("noise_floor", floor),
        pl.Series("class", cls, dtype=pl.String),
    )


def _direction(rows: pl.DataFrame, favourable: set[str]) -> Direction | None:
    """Which group the decisive attributable flips go against, by exact sign test.

    A flip is decisive when exactly one arm selected a favourable label. With two groups
    there is one test; with more, each group is tested against the rest and the smallest p
    is Bonferroni-corrected for having been picked.
    """
    decisive = (
        rows.filter(pl.col("class") == "attributable")
        .with_columns(
            fav_a=pl.col("selected_a").is_in(list(favourable)),
            fav_b=pl.col("selected_b").is_in(list(favourable)),
        )
        .filter(pl.col("fav_a") != pl.col("fav_b"))
    )
    if decisive.is_empty():
        return None
    winners = (
        decisive.select(
            pl.when(pl.col("fav_a")).then(pl.col("group_a")).otherwise(pl.col("group_b"))
        )
        .to_series()
        .to_list()
    )
    losers = (
        decisive.select(
            pl.when(pl.col("fav_a")).then(pl.col("group_b")).otherwise(pl.col("group_a"))
        )
        .to_series()
        .to_list()
    )
    groups = sorted(set(rows["group_a"].to_list()) | set(rows["group_b"].to_list()))
    tallies = {g: (losers.count(g), winners.count(g)) for g in groups}
    tests = {g: sign_test(*tallies[g]) for g in groups}
    # Most significant first; among equals the group with the most losses.
    group = min(groups, key=lambda g: (tests[g], -tallies[g][0], g))
    factor = 1 if len(groups) <= 2 else len(groups)
    lost, won = tallies[group]
    return Direction(group, lost, won, min(1.0, tests[group] * factor), None)


def _axis_result(
    axis: str,
    rows: pl.DataFrame,
    *,
    max_flip_rate: float,
    favourable: set[str] | None,
    blind: bool,
    reason: str | None,
    z: float,
) -> AxisResult:
    cross = rows.filter(pl.col("kind") == "cross")
    placebo = rows.filter(pl.col("kind") == "placebo")
    cls = cross["class"]
    count = {
        name: int((cls == name).sum())
        for name in ("skipped", "multi-axis", "incomplete", "tie", "attributable", "noise", "shift")
    }
    exercised = cross.height - count["skipped"] - count["multi-axis"] - count["incomplete"]
    exercised -= count["tie"]
    flips = count["attributable"] + count["noise"]
    attributable = count["attributable"]
    lo, hi = wilson(attributable, exercised, z)
    rate = attributable / exercised if exercised else None

    counted_placebo = placebo.filter(pl.col("class") == "placebo")
    tau_placebo = float(rows["tau_placebo"][0]) if rows.height else 0.0
    floor = float(rows["noise_floor"][0]) if rows.height else 0.0

    joined = (
        cross.filter(pl.col("class").is_in(["attributable", "noise", "shift", "none"]))
        .select("pair_id", "flipped")
        .join(counted_placebo.select("pair_id", placebo_flipped=pl.col("flipped")), on="pair_id")
    )
    b = int((joined["flipped"] & ~joined["placebo_flipped"]).sum())
    c = int((~joined["flipped"] & joined["placebo_flipped"]).sum())
    mcnemar_p = mcnemar_exact(b, c) if joined.height else None

    sent = rows.filter(pl.col("class") != "skipped").height
    errored = rows.filter(pl.col("class") == "incomplete").height
    if exercised == 0:
        verdict = NOT_EXERCISED
        note = reason or _unexercised_note(count, cross.height)
    else:
        tri = classify(lo, hi, max_flip_rate)
        verdict = {"deterministic": FAIR, "stochastic": UNFAIR, "undecided": UNDECIDED}[tri]
        if blind and verdict == FAIR:
            verdict = NOT_ESTABLISHED_BLIND
        note = _notes(count, blind)
    return AxisResult(
        axis=axis,
        pairs=cross.height,
        skipped=count["skipped"],
        multi_axis=count["multi-axis"],
        incomplete=count["incomplete"],
        ties=count["tie"],
        exercised=exercised,
        flips=flips,
        attributable=attributable,
        shifts=count["shift"],
        flip_rate=flips / exercised if exercised else None,
        attributable_rate=rate,
        ci_low=lo,
        ci_high=hi,
        score=None if rate is None else 1.0 - rate,
        score_low=1.0 - hi,
        score_high=1.0 - lo,
        placebo_pairs=counted_placebo.height,
        placebo_flips=int(counted_placebo["flipped"].sum()),
        tau_placebo=tau_placebo,
        noise_floor=floor,
        mcnemar_b=b,
        mcnemar_c=c,
        mcnemar_p=mcnemar_p,
        mcnemar_p_holm=None,
        direction=None if favourable is None or exercised == 0 else _direction(cross, favourable),
        verdict=verdict,
        pairs_needed=pairs_needed(max_flip_rate, rate or 0.0, z),
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


def _notes(count: Mapping[str, int], blind: bool) -> str:
    parts = []
    if blind:
        parts.append("the suite is blind, so a low flip rate does not show fairness")
    if count["skipped"]:
        parts.append(f"{count['skipped']} pairs rendered identically and were skipped")
    if count["multi-axis"]:
        parts.append(f"{count['multi-axis']} multi-axis pairs kept apart")
    if count["incomplete"]:
        parts.append(f"{count['incomplete']} pairs incomplete (an arm errored)")
    if count["tie"]:
        parts.append(f"{count['tie']} ties excluded")
    return "; ".join(parts)


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
    z: float = Z95,
) -> CounterfactualResult:
    """Per-axis results for ``axes`` (default: the axes in the table, first-seen order).

    ``not_exercised`` carries the pair builder's reasons for axes that got no pairs;
    ``tau_rerun`` is the rerun TV noise floor (the meter's ``tv_p95``; None when unmeasured);
    ``blind`` is the blindness detector's verdict on the base decisions.
    """
    table = classify_pairs(
        pairs, labels, tau_rerun=tau_rerun, max_tv_distance=max_tv_distance, tie_margin=tie_margin
    )
    names = list(axes) if axes is not None else list(dict.fromkeys(table["axis"].to_list()))
    favourable = None if favourable_labels is None else set(favourable_labels)
    results = {
        axis: _axis_result(
            axis,
            table.filter(pl.col("axis") == axis),
            max_flip_rate=max_flip_rate,
            favourable=favourable,
            blind=blind,
            reason=(not_exercised or {}).get(axis),
            z=z,
        )
        for axis in names
    }
    results = _with_holm(results)
    exercised = sum(r.exercised for r in results.values())
    attributable = sum(r.attributable for r in results.values())
    lo, hi = wilson(attributable, exercised, z)
    return CounterfactualResult(
        axes=results,
        pairs=table,
        max_flip_rate=max_flip_rate,
        blind=blind,
        tau_rerun=tau_rerun,
        favourable_labels=None if favourable_labels is None else tuple(favourable_labels),
        exercised=exercised,
        attributable=attributable,
        score=1.0 - attributable / exercised if exercised else None,
        score_low=1.0 - hi,
        score_high=1.0 - lo,
    )


def _with_holm(results: dict[str, AxisResult]) -> dict[str, AxisResult]:
    """Holm-adjust the attribution and direction tests over the axes that have them."""
    tested = [a for a, r in results.items() if r.mcnemar_p is not None]
    adjusted = dict(zip(tested, holm([results[a].mcnemar_p for a in tested]), strict=True))  # type: ignore[misc]
    directed = [a for a, r in results.items() if r.direction is not None]
    p_dir = holm([results[a].direction.p_value for a in directed])  # type: ignore[union-attr]
    adjusted_dir = dict(zip(directed, p_dir, strict=True))
    out = {}
    for axis, result in results.items():
        direction = result.direction
        if direction is not None:
            direction = replace(direction, p_holm=adjusted_dir[axis])
        out[axis] = replace(result, mcnemar_p_holm=adjusted.get(axis), direction=direction)
    return out


def _interval(result: AxisResult) -> str:
    return f"[{result.ci_low:.3f}, {result.ci_high:.3f}]"


def counterfactual_checks(result: CounterfactualResult, level: Level) -> list[Check]:
    """Per axis, in axis order:

    - `counterfactual.<axis>.max_error_rate` (requirement, threshold 0): errored pairs over
      pairs sent; fails as *not exercised* when no pair changed the input;
    - `counterfactual.<axis>.max_flip_rate` (at ``level``): the Wilson **lower** bound of the
      attributable flip rate against ``max_flip_rate``, so only a proven excess fails and
      an undecided axis passes with a note.
    """
    checks = []
    limit = result.max_flip_rate
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
        notes = []
        if r.exercised:
            notes.append(
                f"{r.verdict}: attributable flip rate {r.attributable_rate:.4g} "
                f"({r.attributable}/{r.exercised} pairs), 95% CI {_interval(r)}"
            )
            if r.verdict == UNDECIDED and r.pairs_needed is not None:
                notes.append(f"about {r.pairs_needed} exercised pairs at this rate would decide it")
            if r.direction is not None and r.verdict == UNFAIR:
                notes.append(r.direction.statement)
            if r.note:
                notes.append(r.note)
        checks.append(
            make_check(
                f"{prefix}.max_flip_rate",
                level,
                f"{prefix}.attributable_ci_low",
                "<=",
                limit,
                r.ci_low if r.exercised else None,
                reason_if_null="not exercised",
                suffix=f" ({'; '.join(notes)})" if notes else "",
            )
        )
    return checks


def plan(
    n_cases: int,
    *,
    dimensions: Sequence[str],
    num_pairs_per_dimension: int = 4,
    placebo: bool = True,
    max_flip_rate: float = 0.05,
) -> dict[str, Any]:
    """Price a counterfactual run before any call: pairs per axis against what a claim needs.

    Calls are an upper bound (2 arms per cross pair, 1 more per placebo partner since it
    reuses arm A); identical arms across pairs are decided once, so the real count is lower.
    """
    per_axis = n_cases * num_pairs_per_dimension
    needed = pairs_needed(max_flip_rate)
    arms_per_pair = 3 if placebo else 2
    return {
        "pairs_per_axis": per_axis,
        "pairs_needed": needed,
        "can_qualify": needed is not None and per_axis >= needed,
        "max_calls": per_axis * arms_per_pair * len(dimensions),
        "advice": (
            f"{per_axis} pairs per axis; a fair-qualified verdict at max_flip_rate "
            f"{max_flip_rate:g} needs at least {needed} pairs with no attributable flip"
        ),
    }
