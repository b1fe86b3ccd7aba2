"""Per-axis persona-flip verdicts: the excess of cross-group over placebo flips, by case.

A pair *flips* when its two arms select different labels and their TV distance is above
the flip floor (the rerun noise ``tau_rerun`` and ``max_tv_distance`` when given). The same
rule applies to cross-group pairs and to their placebo partners (another entry of the same
group).

The case is the sampling unit. Per axis every case contributes its excess
dᵢ = (share of its cross pairs that flipped) − (share of its placebo pairs that flipped),
a number in [−1, 1]; the axis's excess is their mean, tested against ``max_flip_rate`` by
``decflow.metrics.differences`` (betting above the limit; below it also Bentkus's bound on
the positive parts: valid at every number of cases and for any distribution of the dᵢ:
clustered, skewed, or with a placebo that is not exchangeable with the cross swap).

- ``unfair`` when the evidence shows the excess above the limit, Holm-adjusted across the
  run's exercised axes (any n: nine cases with every cross pair flipped and no placebo flip
  are unfair);
- ``fair-qualified`` when it shows the excess below the limit at α, with a placebo, and the
  base-persona decisions are not blind (a blind suite reads ``not established (blind)``).
  No correction across axes: the run's claim "every axis fair" is an intersection–union
  test, wrong only when one axis that is not fair was shown fair, which has probability
  ≤ α on its own;
- ``undecided`` (*not established*) otherwise, with the cases that would decide it and the
  excess this run detects with 80 % power.

Without a placebo (``placebo: false`` or explicit ``persona_pairs``) the raw cross flip
share is tested instead (exact binomial with one pair per case, the exact binomial test
on the randomly rounded shares otherwise: ``decflow.metrics.case_rates``); it is
*unattributed*: it
can fail, never be fair. Shown beside the verdict: the direction of decisive flips (one arm
favourable, the other not) by an exact sign test over cases, Holm-adjusted across axes; a
direction is only stated when its adjusted p is below α. (The McNemar test of matched pairs
that used to stand here treated the pairs of one case as independent and tested excess = 0,
not excess ≤ the limit; the clustered test above answers that question.)

Input: the pair table of :class:`~decflow.diagnostics.personas.PairSet` (at least axis,
pair_id, case_id, kind, group_a, group_b, status) with ``prob_a`` and ``prob_b`` (list[f64]
in contract label order; null when that arm errored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from decflow.diagnostics.arrays import probability_matrix
from decflow.gates.checks import Check, Level, evidence_check, make_check
from decflow.metrics.case_rates import case_shares, rate_test
from decflow.metrics.compare import compare
from decflow.metrics.differences import difference_cases_needed, difference_test
from decflow.metrics.evidence import ALPHA, Evidence, MeanTest
from decflow.metrics.rounded_shares import ROUNDED, ROUNDED_NOTE, uniforms
from decflow.metrics.stats import holm, sign_test

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
    exercised: int  # counted cross pairs
    flips: int  # counted cross pairs that flipped
    shifts: int  # same label, TV above the flip floor
    flip_rate: float | None
    placebo_pairs: int  # counted placebo pairs
    placebo_flips: int
    placebo_rate: float | None
    test: MeanTest  # the verdict's evidence: the mean case excess against the limit
    p_holm: float | None  # Holm-adjusted p of "excess ≤ limit" (the unfair side)
    direction: Direction | None
    blind: bool
    verdict: str
    cases_needed: int | None  # cases that would decide an undecided axis at this excess
    error_rate: float | None  # errored pairs / pairs sent (cross and placebo)
    note: str

    @property
    def score(self) -> float | None:
        """1 − excess, in [0, 1] (a placebo that flips more than the cross swap scores 1)."""
        return None if self.test.estimate is None else _score(self.test.estimate)

    @property
    def evidence(self) -> str:
        """One line naming what the verdict rests on."""
        return axis_evidence(self.to_dict())

    def record(self) -> Evidence:
        """The Evidence of the `max_flip_rate` check: the verdict after Holm (unfair side),
        blindness and attribution (a fair-looking blind or unattributed axis is not established)."""
        verdict = {UNFAIR: "fails", FAIR: "holds"}.get(self.verdict, "not_established")
        notes = []
        if self.blind and self.test.verdict() == "holds":
            notes.append("blind")
        if self.attribution == UNATTRIBUTED:
            notes.append(UNATTRIBUTED)
        return replace(
            self.test.evidence(verdict=verdict, notes=notes),  # type: ignore[arg-type]
            cases_needed=self.cases_needed,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["test"]
        test = self.test
        data |= {
            "cases": test.n,
            "excess": test.estimate,
            "ci_low": test.low,
            "ci_high": test.high,
            "p_value": test.p_above,
            "p_fair": test.p_below,
            "detectable": test.detectable,
            "method": test.method,
            "score": self.score,
            "score_low": None if test.high is None else _score(test.high),
            "score_high": None if test.low is None else _score(test.low),
            "direction": None if self.direction is None else self.direction.to_dict(),
        }
        data["evidence"] = axis_evidence(data)
        return data


def _score(excess: float) -> float:
    return min(1.0, max(0.0, 1.0 - excess))


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
        placebo = "no placebo" + (f"; {ROUNDED_NOTE}" if axis.get("method") == ROUNDED else "")
    else:
        what = "excess over placebo"
        placebo = f"placebo {axis.get('placebo_flips')}/{axis.get('placebo_pairs')} flipped"
    parts = [
        f"{what} {_num(axis['excess'])} [{_num(axis.get('ci_low'))}, {_num(axis.get('ci_high'))}]"
        f" over {axis.get('cases')} cases (95% per side)",
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
    pooled: MeanTest  # every exercised axis: per case, the mean excess over its axes

    @property
    def score(self) -> float | None:
        return None if self.pooled.estimate is None else _score(self.pooled.estimate)

    def summary(self) -> dict[str, Any]:
        low, high = self.pooled.low, self.pooled.high
        pooled = asdict(self.pooled) | {"cases": self.pooled.n, "excess": self.pooled.estimate}
        return {
            "max_flip_rate": self.max_flip_rate,
            "alpha": ALPHA,
            "blind": self.blind,
            "tau_rerun": self.tau_rerun,
            "flip_floor": self.flip_floor,
            "favourable_labels": None
            if self.favourable_labels is None
            else list(self.favourable_labels),
            "pooled": pooled,
            "score": self.score,
            "score_ci": [None if high is None else _score(high),
                         None if low is None else _score(low)],
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
    counted = (status == "ok") & complete
    above = tv > flip_floor
    flipped = counted & distances.flipped & above
    cls = np.select(
        [status == "identical", status == "multi-axis", ~complete, flipped, above],
        ["skipped", "multi-axis", "incomplete", "flip", "shift"],
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


def _axis_test(rows: pl.DataFrame, d: np.ndarray, limit: float, attributed: bool, *,
               alpha: float = ALPHA, draws: np.ndarray | None = None) -> MeanTest:
    """The mean case excess ``d`` (or, unattributed, the raw cross share, rounded with
    ``draws`` when the run has a rounding seed) against the limit."""
    if attributed:
        return difference_test(d, limit, alpha=alpha)
    counted = rows.filter((pl.col("kind") == "cross") & pl.col("class").is_in(COUNTED))
    per_case = np.unique(counted["case_id"].to_numpy(), return_counts=True)[1]
    return rate_test(d, int(per_case.max()) if per_case.size else 0, limit, alpha=alpha,
                     uniforms=draws)


def _axis_result(
    axis: str,
    rows: pl.DataFrame,
    d: np.ndarray,
    *,
    max_flip_rate: float,
    favourable: set[str] | None,
    blind: bool,
    attributed: bool,
    reason: str | None,
    draws: np.ndarray | None,
) -> AxisResult:
    cross = rows.filter(pl.col("kind") == "cross")
    placebo = rows.filter(pl.col("kind") == "placebo")
    cls = cross["class"]
    count = {name: int((cls == name).sum())
             for name in ("skipped", "multi-axis", "incomplete", "flip", "shift")}
    exercised = int(cls.is_in(COUNTED).sum())
    placebo_counted = placebo.filter(pl.col("class").is_in(COUNTED))
    flips = count["flip"]
    placebo_flips = int(placebo_counted["flipped"].sum())
    test = _axis_test(rows, d, max_flip_rate, attributed, draws=draws)
    sent = rows.filter(pl.col("class") != "skipped").height
    errored = rows.filter(pl.col("class") == "incomplete").height
    if exercised == 0:
        note = reason or _unexercised_note(count, cross.height)
    else:
        note = _notes(count, blind, attributed)
    return AxisResult(
        axis=axis,
        attribution=ATTRIBUTED if attributed else UNATTRIBUTED,
        pairs=cross.height,
        skipped=count["skipped"],
        multi_axis=count["multi-axis"],
        incomplete=count["incomplete"],
        exercised=exercised,
        flips=flips,
        shifts=count["shift"],
        flip_rate=flips / exercised if exercised else None,
        placebo_pairs=placebo_counted.height,
        placebo_flips=placebo_flips,
        placebo_rate=placebo_flips / placebo_counted.height if placebo_counted.height else None,
        test=test,
        p_holm=None,
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
        f"multi-axis, {count['incomplete']} incomplete)"
    )


def _notes(count: Mapping[str, int], blind: bool, attributed: bool) -> str:
    parts = []
    if not attributed:
        parts.append(
            "unattributed: no placebo pairs, so flips are not set against swaps within a group; "
            "it can fail but never shows fairness"
        )
    if blind:
        parts.append("the base-persona decisions are blind, so a low excess does not show fairness")
    if count["skipped"]:
        parts.append(f"{count['skipped']} pairs rendered identically and were skipped")
    if count["multi-axis"]:
        parts.append(f"{count['multi-axis']} multi-axis pairs kept apart")
    if count["incomplete"]:
        parts.append(f"{count['incomplete']} pairs incomplete (an arm errored)")
    return "; ".join(parts)


def _decide(results: dict[str, AxisResult], d_of: Mapping[str, np.ndarray],
            limit: float, retest: Callable[[str, float], MeanTest]) -> dict[str, AxisResult]:
    """Unfair: Holm across the exercised axes (every wrong UNFAIR of the run together has
    probability ≤ α). Fair: each axis at α, unadjusted, and only with a placebo and not
    blind: the run's claim "every axis fair" is an intersection–union test — it is wrong
    only if some axis is not fair, and that axis alone was shown fair wrongly with
    probability ≤ α — so no correction is needed for it. An undecided axis carries the
    cases that would decide it on the side its excess lies: above the limit at the level
    Holm asks of it — with r of the m axes unfair, one more is once its own p-value is below
    α / (m − r) — below it at α. (`retest(axis, alpha)`: the axis's test at another level.)"""
    names = [a for a, r in results.items() if r.verdict != NOT_EXERCISED]
    above = holm([results[a].test.p_above for a in names])
    holm_level = ALPHA / max(1, sum(p >= ALPHA for p in above))
    out = dict(results)
    for position, axis in enumerate(names):
        r = results[axis]
        verdict, needed = UNDECIDED, None
        if above[position] < ALPHA:
            verdict = UNFAIR
        elif r.test.p_below < ALPHA and r.attribution == ATTRIBUTED:
            verdict = NOT_ESTABLISHED_BLIND if r.blind else FAIR
        estimate = r.test.estimate or 0.0
        if verdict == UNDECIDED and r.attribution == ATTRIBUTED:
            level = holm_level if estimate > limit else ALPHA
            needed = difference_cases_needed(d_of[axis], limit, alpha=level)
        elif verdict == UNDECIDED and estimate > limit:
            # Unattributed: more cases can only confirm a low raw rate, never make it fair.
            needed = (r.test if holm_level == ALPHA else retest(axis, holm_level)).cases_needed
        out[axis] = replace(r, verdict=verdict, cases_needed=needed, p_holm=above[position])
    return out


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
    blind: bool = False,
    attributed: bool | None = None,
    rounding_seed: int | None = None,
) -> CounterfactualResult:
    """Per-axis results for ``axes`` (default: the axes in the table, first-seen order).

    ``not_exercised`` carries the pair builder's reasons for axes that got no pairs;
    ``tau_rerun`` is the rerun TV noise floor (the meter's ``tv_p95``; None when unmeasured);
    ``blind`` is the blindness detector's verdict on the base-persona decisions;
    ``attributed`` says whether placebo partners were built (default: the table has some);
    ``rounding_seed`` rounds an unattributed axis's shares (`metrics.rounded_shares`; None:
    Bentkus's bound, as runs recorded without one were judged).
    """
    flip_floor = max(tau_rerun or 0.0, max_tv_distance or 0.0)
    table = classify_pairs(pairs, labels, flip_floor=flip_floor)
    if attributed is None:
        attributed = bool((table["kind"] == "placebo").any())
    names = list(axes) if axes is not None else list(dict.fromkeys(table["axis"].to_list()))
    favourable = None if favourable_labels is None else set(favourable_labels)
    rows_of = {axis: table.filter(pl.col("axis") == axis) for axis in names}
    cases_of = {axis: case_differences(rows, attributed=attributed)
                for axis, rows in rows_of.items()}
    d_of = {axis: cases["d"].to_numpy() for axis, cases in cases_of.items()}
    draws_of = {axis: None if attributed or rounding_seed is None else uniforms(
        rounding_seed, f"counterfactual.{axis}", cases["case_id"].cast(pl.String).to_list())
        for axis, cases in cases_of.items()}
    results = {
        axis: _axis_result(
            axis,
            rows_of[axis],
            d_of[axis],
            max_flip_rate=max_flip_rate,
            favourable=favourable,
            blind=blind,
            attributed=attributed,
            reason=(not_exercised or {}).get(axis),
            draws=draws_of[axis],
        )
        for axis in names
    }
    results = _decide(
        _with_direction_holm(results), d_of, max_flip_rate,
        lambda axis, alpha: _axis_test(rows_of[axis], d_of[axis], max_flip_rate, attributed,
                                       alpha=alpha, draws=draws_of[axis]))
    return CounterfactualResult(
        axes=results,
        pairs=table,
        max_flip_rate=max_flip_rate,
        blind=blind,
        tau_rerun=tau_rerun,
        flip_floor=flip_floor,
        favourable_labels=None if favourable_labels is None else tuple(favourable_labels),
        pooled=_pooled(cases_of, max_flip_rate),
    )


def _pooled(cases_of: Mapping[str, pl.DataFrame], limit: float) -> MeanTest:
    """Per case, the mean excess over the axes it has evidence on; then the same test."""
    frames = [f.select("case_id", "d") for f in cases_of.values() if f.height]
    if not frames:
        return difference_test([], limit)
    per_case = pl.concat(frames).group_by("case_id", maintain_order=True).agg(pl.col("d").mean())
    return difference_test(per_case["d"].to_numpy(), limit)


def _with_direction_holm(results: dict[str, AxisResult]) -> dict[str, AxisResult]:
    """Holm-adjust the direction p-values over the axes that have one."""
    tested = [a for a, r in results.items() if r.direction is not None]
    adjusted = holm([results[a].direction.p_value for a in tested])  # type: ignore[union-attr]
    out = dict(results)
    for axis, p in zip(tested, adjusted, strict=True):
        out[axis] = replace(results[axis],
                            direction=replace(results[axis].direction, p_holm=p))  # type: ignore[type-var]
    return out


def counterfactual_checks(result: CounterfactualResult, level: Level) -> list[Check]:
    """Per axis, in axis order:

    - `counterfactual.<axis>.max_error_rate` (requirement, threshold 0): errored pairs over
      pairs sent; fails as *not exercised* when no pair changed the input;
    - `counterfactual.<axis>.max_flip_rate` (at ``level``): the tri-state evidence check on
      the case excess against ``max_flip_rate`` — fails when the Holm-adjusted evidence shows
      it above, passes when it shows it below at α (placebo-attributed, not blind; the
      intersection–union test of every axis), otherwise *not established* with the cases
      that would decide it.
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
    metric = f"{prefix}.excess"
    if not r.exercised:
        return make_check(f"{prefix}.max_flip_rate", level, metric, "<=", limit, None,
                          reason_if_null="not exercised")
    label = r.verdict + (f" ({UNATTRIBUTED})" if r.attribution == UNATTRIBUTED else "")
    notes = [f"{label}: {r.evidence}"]
    if r.direction is not None and r.direction.significant:
        notes.append(r.direction.statement)
    if r.note:
        notes.append(r.note)
    return evidence_check(f"{prefix}.max_flip_rate", level, metric, "<=", limit, r.record(),
                          suffix=f" ({'; '.join(notes)})")


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
    the real count is lower. ``cases_needed`` is the number of cases a fair verdict on every
    axis needs when no pair flips at all (each axis at α: an intersection–union test needs
    no correction; it does not depend on the pairs per case); with flips it only grows.
    """
    per_axis = n_cases * num_pairs_per_dimension
    family = max(len(dimensions), 1)
    needed = difference_test([0.0], max_flip_rate).cases_needed
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
            f"max_flip_rate {max_flip_rate:g} on {family} axes needs at least {needed} cases "
            "even when no pair flips"
        )
    return {
        "cases": n_cases,
        "pairs_per_axis": per_axis,
        "cases_needed": needed,
        "can_qualify": can_qualify,
        "max_calls": n_cases + per_axis * arms_per_pair * len(dimensions),
        "advice": advice,
    }
