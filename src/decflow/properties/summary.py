"""Per-property summaries (`properties.summaries[]`) and property checks.

Inputs are columns over the transformed cases of one property: the error kind of each
transformed case (None when it has a result) and, for the evaluated ones, the comparison
and judgement columns. Means use exact summation (`math.fsum`) in row order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from decflow.contracts.properties import PropertyConfig
from decflow.gates.checks import Check, make_check
from decflow.metrics.compare import Comparison, Judgement, Limits, level_decrease
from decflow.metrics.stats import pairs_needed, wilson

NOT_TRANSFORMED = "no case could be transformed"
NOT_RUN = "the property was not run"
NOT_EVALUATED = "no transformed case has a result"


def _max(values: np.ndarray) -> float | None:
    return float(values.max()) if len(values) else None


def property_summary(
    property_name: str,
    *,
    level: str,
    relation: str,
    n_cases: int,
    n_skipped: int,
    error_kinds: Sequence[str | None],
    comparison: Comparison,
    judgement: Judgement,
    n_reduced: int,
    direction: str = "increasing",
) -> dict[str, Any]:
    """The summary dict, keys in DecGuard's order; `comparison` covers evaluated cases only."""
    errors = Counter(kind for kind in error_kinds if kind is not None)
    n_errors = sum(errors.values())
    n_evaluated = len(comparison)
    if len(error_kinds) - n_errors != n_evaluated:
        raise ValueError("comparison rows must be the transformed cases without an error")
    n_violations = int(judgement.limit_violated.sum())
    n_flips = int(comparison.flipped.sum())
    rate = (lambda count: count / n_evaluated) if n_evaluated else (lambda _count: None)
    decrease = None
    if relation == "monotonic" and n_evaluated:
        decrease = float(level_decrease(comparison, direction).max())
    return {
        "property": property_name,
        "level": level,
        "relation": relation,
        "n_cases": n_cases,
        "n_transformed": len(error_kinds),
        "n_skipped": n_skipped,
        "n_errors": n_errors,
        "errors_by_kind": dict(sorted(errors.items())),
        "n_evaluated": n_evaluated,
        "n_violations": n_violations,
        "violation_rate": rate(n_violations),
        "n_flips": n_flips,
        "flip_rate": rate(n_flips),
        "mean_tv_distance": math.fsum(comparison.tv.tolist()) / n_evaluated
        if n_evaluated
        else None,
        "max_tv_distance": _max(comparison.tv),
        "max_js_divergence": _max(comparison.js),
        "max_abs_delta": _max(comparison.max_abs_delta),
        "max_abs_confidence_delta": _max(np.abs(comparison.confidence_delta)),
        "max_level_decrease": decrease,
        "n_reduced": n_reduced,
    }


def property_checks(
    summary: dict[str, Any] | None, property_name: str, config: PropertyConfig, relation: str
) -> list[Check]:
    """The checks of one enabled property; `summary` None means the property did not run."""
    level = config.level
    n_transformed = summary["n_transformed"] if summary else 0
    error_rate = summary["n_errors"] / n_transformed if summary and n_transformed else None
    checks = [
        make_check(
            f"{property_name}.max_error_rate",
            "requirement",
            f"{property_name}.error_rate",
            "<=",
            0.0,
            error_rate,
            reason_if_null=NOT_TRANSFORMED if summary else NOT_RUN,
        )
    ]
    limits = Limits.of(config, relation)
    per_case = limits.per_case()
    if per_case:
        listed = ", ".join(f"{key} {value:g}" for key, value in per_case)
        checks.append(
            make_check(
                f"{property_name}.max_violation_rate",
                level,
                f"{property_name}.violation_rate",
                "<=",
                getattr(config, "max_violation_rate", 0.0),
                summary["violation_rate"] if summary else None,
                reason_if_null=_null_reason(summary),
                suffix=f" (per case: {listed})",
            )
        )
    if limits.max_flip_rate is not None:
        checks.append(
            make_check(
                f"{property_name}.max_flip_rate",
                level,
                f"{property_name}.flip_rate",
                "<=",
                limits.max_flip_rate,
                summary["flip_rate"] if summary else None,
                reason_if_null=_null_reason(summary),
            )
        )
    return checks


def rate_evidence(
    summary: dict[str, Any] | None, property_name: str, config: Any, relation: str
) -> list[dict[str, Any]]:
    """What each gated rate of one property rests on, beside DecGuard's unchanged checks.

    Per gate: the count, the Wilson 95 % interval and a statement. The verdict itself stays
    DecGuard's (rate against limit); the evidence says how far it can be trusted: with a
    limit above 0, a pass whose upper bound is above the limit is *underpowered*, with the
    cases that would show the rate below it at the observed rate (none when the rate is at
    or above the limit); with limit 0, a pass reads "0 of n, upper bound u".
    """
    if summary is None or not summary["n_evaluated"]:
        return []
    limits = Limits.of(config, relation)
    gated = []
    if limits.per_case():
        gated.append(("max_violation_rate", summary["n_violations"],
                      getattr(config, "max_violation_rate", 0.0)))
    if limits.max_flip_rate is not None:
        gated.append(("max_flip_rate", summary["n_flips"], limits.max_flip_rate))
    n = summary["n_evaluated"]
    out = []
    for gate, count, limit in gated:
        low, high = wilson(count, n)
        rate = count / n
        passed = rate <= limit
        underpowered = passed and limit > 0 and high > limit
        needed = pairs_needed(limit, rate) if underpowered and 0 < limit < 1 else None
        if not passed:
            statement = f"{count} of {n}, 95% CI [{low:.3f}, {high:.3f}]"
        elif limit == 0:
            statement = f"{count} of {n}, upper bound {high:.3f}"
        elif underpowered:
            more = (
                f"; about {needed} compared cases at this rate would show it below the limit"
                if needed is not None else "; at this rate no number of cases shows it below"
            )
            statement = f"underpowered: {count} of {n}, upper bound {high:.3f} > {limit:g}{more}"
        else:
            statement = f"{count} of {n}, upper bound {high:.3f} < {limit:g}"
        out.append({
            "gate": f"{property_name}.{gate}",
            "count": count,
            "n": n,
            "rate": rate,
            "limit": limit,
            "ci_low": low,
            "ci_high": high,
            "underpowered": underpowered,
            "cases_needed": needed,
            "statement": statement,
        })
    return out


def _null_reason(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return NOT_RUN
    return NOT_TRANSFORMED if summary["n_transformed"] == 0 else NOT_EVALUATED
